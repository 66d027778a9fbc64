-- Marketplace connectors in SQLite: one cursor per connector (kaspi, ozon, wildberries),
-- shaped like PostgreSQL's 0003_connectors.sql. Times are INTEGER microseconds since the
-- Unix epoch, UTC.
--
-- position is the end of the last window listed completely: every order up to it was
-- registered or recorded. NULL before the first complete listing.
--
-- Written whole by SaveCursor: INSERT … ON CONFLICT (connector) DO UPDATE.

CREATE TABLE connector_cursors (
    connector       TEXT    PRIMARY KEY CHECK (connector <> ''),
    position        INTEGER,
    last_poll_at    INTEGER,
    last_success_at INTEGER,
    last_error      TEXT    NOT NULL DEFAULT '',
    orders_seen     INTEGER NOT NULL DEFAULT 0 CHECK (orders_seen >= 0),  -- items handled, repeats included
    unreadable      INTEGER NOT NULL DEFAULT 0 CHECK (unreadable >= 0),   -- items whose id could not be read
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;
