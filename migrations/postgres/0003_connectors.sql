-- Marketplace connectors: one cursor per connector (kaspi, ozon, wildberries), so that
-- a restart resumes where the last complete listing ended, and the health
-- that `ordersync connectors status` shows.
--
-- position is the end of the last window listed completely: every order up to it was
-- registered or recorded. NULL before the first complete listing. A poll lists from
-- position less the connector's lookback, so the overlap absorbs late orders and clock
-- skew; registration absorbs the repeats.
--
-- Written whole by SaveCursor: INSERT … ON CONFLICT (connector) DO UPDATE.

CREATE TABLE connector_cursors (
    connector       text        PRIMARY KEY CHECK (connector <> ''),
    position        timestamptz NULL,
    last_poll_at    timestamptz NULL,
    last_success_at timestamptz NULL,
    last_error      text        NOT NULL DEFAULT '',
    orders_seen     bigint      NOT NULL DEFAULT 0 CHECK (orders_seen >= 0),  -- items handled, repeats included
    unreadable      bigint      NOT NULL DEFAULT 0 CHECK (unreadable >= 0),   -- items whose id could not be read
    updated_at      timestamptz NOT NULL
);
