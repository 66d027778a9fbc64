-- Stock snapshots: the same tables as PostgreSQL's (migrations/postgres/0008_stock.sql),
-- in SQLite's types. Times are INTEGER microseconds since the Unix epoch, UTC;
-- warnings are JSON text (NULL: none).
--
-- Quantities and prices are TEXT, the decimal as written with its scale (2.500 stays
-- 2.500): a NUMERIC or REAL column would turn them into doubles. SKUs compare
-- byte-wise (SQLite's BINARY collation), as PostgreSQL's COLLATE "C" columns do.

CREATE TABLE stock_snapshots (
    key        TEXT    PRIMARY KEY REFERENCES operations (key),
    schedule   TEXT    NOT NULL CHECK (schedule <> ''),
    warehouse  TEXT    NOT NULL CHECK (warehouse <> ''),
    slot       INTEGER NOT NULL,
    label      TEXT    NOT NULL DEFAULT '',
    taken_at   TEXT    NOT NULL DEFAULT '',
    item_count INTEGER NOT NULL CHECK (item_count >= 0),
    warnings   TEXT    CHECK (warnings IS NULL OR json_valid(warnings)),
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX stock_snapshots_latest_idx ON stock_snapshots (warehouse, slot DESC, created_at DESC, key DESC);
CREATE INDEX stock_snapshots_newest_idx ON stock_snapshots (slot DESC, created_at DESC, key DESC);

CREATE TABLE stock_snapshot_items (
    snapshot_key TEXT NOT NULL,
    sku          TEXT NOT NULL CHECK (sku <> ''),
    quantity     TEXT NOT NULL,
    price        TEXT NOT NULL,
    PRIMARY KEY (snapshot_key, sku)
) WITHOUT ROWID;

CREATE TABLE stock_item_states (
    marketplace  TEXT    NOT NULL CHECK (marketplace <> ''),
    warehouse    TEXT    NOT NULL CHECK (warehouse <> ''),
    sku          TEXT    NOT NULL CHECK (sku <> ''),
    market_sku   TEXT    NOT NULL DEFAULT '',
    value        INTEGER NOT NULL,
    outcome      TEXT    NOT NULL CHECK (outcome IN ('published', 'refused', 'mismatch', 'skipped', 'deferred')),
    reason       TEXT    NOT NULL DEFAULT '',
    warning      TEXT    NOT NULL DEFAULT '',
    snapshot_key TEXT    NOT NULL DEFAULT '',
    sent_at      INTEGER,
    published_at INTEGER,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (marketplace, warehouse, sku)
) WITHOUT ROWID;

CREATE INDEX stock_item_states_problems_idx ON stock_item_states (marketplace, updated_at DESC)
    WHERE outcome IN ('refused', 'mismatch', 'skipped');
CREATE INDEX stock_item_states_problems_all_idx ON stock_item_states (updated_at DESC)
    WHERE outcome IN ('refused', 'mismatch', 'skipped');
CREATE INDEX stock_item_states_sent_idx ON stock_item_states (marketplace, sent_at DESC) WHERE sent_at IS NOT NULL;

CREATE TABLE stock_publishes (
    snapshot_key TEXT    NOT NULL REFERENCES stock_snapshots (key),
    marketplace  TEXT    NOT NULL CHECK (marketplace <> ''),
    warehouse    TEXT    NOT NULL CHECK (warehouse <> ''),
    full_refresh INTEGER NOT NULL CHECK (full_refresh IN (0, 1)),
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    sent         INTEGER NOT NULL DEFAULT 0 CHECK (sent >= 0),
    published    INTEGER NOT NULL DEFAULT 0 CHECK (published >= 0),
    refused      INTEGER NOT NULL DEFAULT 0 CHECK (refused >= 0),
    mismatched   INTEGER NOT NULL DEFAULT 0 CHECK (mismatched >= 0),
    skipped      INTEGER NOT NULL DEFAULT 0 CHECK (skipped >= 0),
    unchanged    INTEGER NOT NULL DEFAULT 0 CHECK (unchanged >= 0),
    note         TEXT    NOT NULL DEFAULT '',
    warnings     TEXT    CHECK (warnings IS NULL OR json_valid(warnings)),
    PRIMARY KEY (snapshot_key, marketplace)
) WITHOUT ROWID;

CREATE INDEX stock_publishes_newest_idx ON stock_publishes (marketplace, warehouse, started_at DESC);
CREATE INDEX stock_publishes_started_idx ON stock_publishes (started_at DESC);
CREATE INDEX stock_publishes_full_idx ON stock_publishes (marketplace, warehouse, finished_at DESC)
    WHERE full_refresh AND finished_at IS NOT NULL;
