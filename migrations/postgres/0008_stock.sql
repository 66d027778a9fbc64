-- Stock snapshots: what 1C held in a warehouse at a scheduled slot, and
-- what each marketplace was told of it.
--
-- A snapshot is a journal operation (kind stock.snapshot): its row and its items are
-- written by the claim's Finish in the transaction that marks the operation done,
-- with its publishing events, so a snapshot is stored whole or not at all. Its key is
-- the operation's key (stock:<schedule>:<warehouse>:<slot>).

CREATE TABLE stock_snapshots (
    key        text        PRIMARY KEY REFERENCES operations (key),
    schedule   text        NOT NULL CHECK (schedule <> ''),
    warehouse  text        NOT NULL CHECK (warehouse <> ''),
    slot       timestamptz NOT NULL,           -- the scheduled fire time
    label      text        NOT NULL DEFAULT '', -- the slot as written in the key (local time)
    taken_at   text        NOT NULL DEFAULT '', -- 1C's taken_at, zone-less, as it sent it
    item_count int         NOT NULL CHECK (item_count >= 0),
    warnings   jsonb,                           -- ["negative quantity …", …]; NULL: none
    created_at timestamptz NOT NULL
);

-- Latest: the newest snapshot of a warehouse at or before a time (slot, then the
-- latest stored); Snapshots filtered by warehouse.
CREATE INDEX stock_snapshots_latest_idx ON stock_snapshots (warehouse, slot DESC, created_at DESC, key DESC);
-- Snapshots of every warehouse, newest first.
CREATE INDEX stock_snapshots_newest_idx ON stock_snapshots (slot DESC, created_at DESC, key DESC);

-- The items of a snapshot. Quantities and prices are exact decimals: numeric keeps
-- every digit and the scale (2.500 comes back as 2.500). SKUs sort byte-wise (COLLATE
-- "C"), as Go and SQLite sort them, so Items reads the primary key in order. Items are
-- only written with their snapshot, in one statement (no foreign key: 50,000 checks
-- of the same parent row would be a tenth of the write).
CREATE TABLE stock_snapshot_items (
    snapshot_key text                NOT NULL,
    sku          text COLLATE "C"    NOT NULL CHECK (sku <> ''),
    quantity     numeric             NOT NULL,
    price        numeric             NOT NULL,
    PRIMARY KEY (snapshot_key, sku)
);

-- What each marketplace was last told of each item of each warehouse, by 1C SKU:
-- one row per (marketplace, warehouse, sku), replaced by every publish that handles
-- the item. outcome: published, refused, mismatch, skipped, deferred.
CREATE TABLE stock_item_states (
    marketplace  text             NOT NULL CHECK (marketplace <> ''),
    warehouse    text             NOT NULL CHECK (warehouse <> ''),
    sku          text COLLATE "C" NOT NULL CHECK (sku <> ''),
    market_sku   text             NOT NULL DEFAULT '',
    value        bigint           NOT NULL,
    outcome      text             NOT NULL CHECK (outcome IN ('published', 'refused', 'mismatch', 'skipped', 'deferred')),
    reason       text             NOT NULL DEFAULT '',
    warning      text             NOT NULL DEFAULT '',
    snapshot_key text             NOT NULL DEFAULT '',
    sent_at      timestamptz,
    published_at timestamptz,
    updated_at   timestamptz      NOT NULL,
    PRIMARY KEY (marketplace, warehouse, sku)
);

-- Problems: refused, mismatched or skipped items, newest first (of one marketplace,
-- or of all).
CREATE INDEX stock_item_states_problems_idx ON stock_item_states (marketplace, updated_at DESC)
    WHERE outcome IN ('refused', 'mismatch', 'skipped');
CREATE INDEX stock_item_states_problems_all_idx ON stock_item_states (updated_at DESC)
    WHERE outcome IN ('refused', 'mismatch', 'skipped');
-- LastSent: the latest sent_at of a marketplace.
CREATE INDEX stock_item_states_sent_idx ON stock_item_states (marketplace, sent_at DESC) WHERE sent_at IS NOT NULL;

-- One snapshot's publishing to one marketplace. The first StartPublish records it; a
-- resumed publish (the relay cut it at its lease's end) finds it and keeps its full
-- flag and start. FinishPublish writes the counts.
CREATE TABLE stock_publishes (
    snapshot_key text        NOT NULL REFERENCES stock_snapshots (key),
    marketplace  text        NOT NULL CHECK (marketplace <> ''),
    warehouse    text        NOT NULL CHECK (warehouse <> ''),
    full_refresh boolean     NOT NULL,  -- every item sent, not only the changed ones
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    sent         int         NOT NULL DEFAULT 0 CHECK (sent >= 0),
    published    int         NOT NULL DEFAULT 0 CHECK (published >= 0),
    refused      int         NOT NULL DEFAULT 0 CHECK (refused >= 0),
    mismatched   int         NOT NULL DEFAULT 0 CHECK (mismatched >= 0),
    skipped      int         NOT NULL DEFAULT 0 CHECK (skipped >= 0),
    unchanged    int         NOT NULL DEFAULT 0 CHECK (unchanged >= 0),
    note         text        NOT NULL DEFAULT '',
    warnings     jsonb,                  -- a few of the value warnings; NULL: none
    PRIMARY KEY (snapshot_key, marketplace)
);

-- Publishes newest first, of a marketplace and warehouse (and Latest per pair);
-- LastFull.
CREATE INDEX stock_publishes_newest_idx ON stock_publishes (marketplace, warehouse, started_at DESC);
CREATE INDEX stock_publishes_started_idx ON stock_publishes (started_at DESC);
CREATE INDEX stock_publishes_full_idx ON stock_publishes (marketplace, warehouse, finished_at DESC)
    WHERE full_refresh AND finished_at IS NOT NULL;
