-- Payout lines and their readings: the same tables as PostgreSQL's
-- (migrations/postgres/0014_payout_lines.sql), in SQLite's types. Times are INTEGER
-- microseconds since the Unix epoch, UTC. Amounts and quantities are TEXT, the
-- decimal as written with its scale: a NUMERIC or REAL column would turn them into
-- doubles, so the sum of the parts is checked in Go (payouts.Line.Validate) before
-- every write, not here. raw is the marketplace's JSON as it sent it.

CREATE TABLE payout_lines (
    source           TEXT    NOT NULL CHECK (source <> ''),
    line_id          TEXT    NOT NULL CHECK (line_id <> ''),
    type             TEXT    NOT NULL DEFAULT '',
    kind             TEXT    NOT NULL CHECK (kind IN ('sale', 'return', 'order_service', 'cabinet')),
    date             INTEGER NOT NULL,
    order_id         TEXT    NOT NULL DEFAULT '',
    sku              TEXT    NOT NULL DEFAULT '',
    quantity         TEXT,
    currency         TEXT    NOT NULL CHECK (currency <> ''),
    amount           TEXT    NOT NULL,
    accrued_for_sale TEXT    NOT NULL,
    commission       TEXT    NOT NULL,
    logistics        TEXT    NOT NULL,
    penalty          TEXT    NOT NULL,
    other            TEXT    NOT NULL,
    raw              TEXT    CHECK (raw IS NULL OR json_valid(raw)),
    fetched_at       INTEGER NOT NULL,
    PRIMARY KEY (source, line_id)
) WITHOUT ROWID;

CREATE INDEX payout_lines_date_idx ON payout_lines (source, date, line_id);
CREATE INDEX payout_lines_order_idx ON payout_lines (order_id) WHERE order_id <> '';

CREATE TABLE payout_fetches (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    source      TEXT    NOT NULL CHECK (source <> ''),
    period_from INTEGER,
    period_to   INTEGER,
    origin      TEXT    NOT NULL DEFAULT '',
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    inserted    INTEGER NOT NULL DEFAULT 0 CHECK (inserted >= 0),
    repeated    INTEGER NOT NULL DEFAULT 0 CHECK (repeated >= 0),
    total       TEXT,
    error       TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX payout_fetches_latest_idx ON payout_fetches (source, started_at DESC, id DESC);
