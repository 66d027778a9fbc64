-- Payout lines: a marketplace's financial lines (what it accrued for an order's sale,
-- withheld as commission, logistics and penalties, reversed for a return, charged the
-- cabinet), as the connectors read them, and the record of each reading.
--
-- A line is kept once per (source, line_id), the marketplace's own id of it: a line
-- read again is left as it was (internal/payouts.Store.SaveLines). Amounts are exact
-- decimals: numeric keeps every digit and the scale. amount is the sum of the five
-- parts (payouts.Line.Validate checks it before any write; the CHECK below holds the
-- database to it too). raw is the marketplace's own record of the line, as it sent
-- it (json keeps the text as given, where jsonb would reorder it).

CREATE TABLE payout_lines (
    source           text             NOT NULL CHECK (source <> ''),
    line_id          text COLLATE "C" NOT NULL CHECK (line_id <> ''),
    type             text             NOT NULL DEFAULT '',
    kind             text             NOT NULL CHECK (kind IN ('sale', 'return', 'order_service', 'cabinet')),
    date             timestamptz      NOT NULL,
    order_id         text             NOT NULL DEFAULT '',
    sku              text             NOT NULL DEFAULT '',
    quantity         numeric,
    currency         text             NOT NULL CHECK (currency <> ''),
    amount           numeric          NOT NULL,
    accrued_for_sale numeric          NOT NULL,
    commission       numeric          NOT NULL,
    logistics        numeric          NOT NULL,
    penalty          numeric          NOT NULL,
    other            numeric          NOT NULL,
    raw              json,
    fetched_at       timestamptz      NOT NULL,
    PRIMARY KEY (source, line_id),
    CHECK (amount = accrued_for_sale + commission + logistics + penalty + other)
);

-- Lines of a source in a period (the reconciliation's month), by date.
CREATE INDEX payout_lines_date_idx ON payout_lines (source, date, line_id);
-- Lines of given orders, whatever their date.
CREATE INDEX payout_lines_order_idx ON payout_lines (order_id) WHERE order_id <> '';

-- One reading of a source's lines: `payouts fetch`, the schedule, `payouts import`.
-- total is the marketplace's own sum of the period when it states one.
CREATE TABLE payout_fetches (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source      text        NOT NULL CHECK (source <> ''),
    period_from timestamptz,
    period_to   timestamptz,
    origin      text        NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    inserted    int         NOT NULL DEFAULT 0 CHECK (inserted >= 0),
    repeated    int         NOT NULL DEFAULT 0 CHECK (repeated >= 0),
    total       numeric,
    error       text        NOT NULL DEFAULT ''
);

-- The latest reading of each source.
CREATE INDEX payout_fetches_latest_idx ON payout_fetches (source, started_at DESC, id DESC);
