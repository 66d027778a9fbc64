-- The accountant's list in SQLite: the same as PostgreSQL's 0013_accountant_list.sql
-- in SQLite's terms. Times are INTEGER microseconds since the Unix epoch, UTC; the
-- order's total is its exact decimal as TEXT (the store sums them as decimals, never
-- as SQLite's floating point).
--
--   order_created_at  the marketplace's own date of the order (the payload's
--                     created_at), NULL when the payload names none; the list's
--                     period is coalesce(order_created_at, created_at)
--   order_total       the order's total, NULL when it names none; currency its
--                     currency
--   search_text       what the broad search (journal.Filter.Search) looks in,
--                     lower-cased by Go's rule (SQLite's lower() folds ASCII only,
--                     and names are Cyrillic)
--   onec_seen         what the latest reconciliation saw of the order in 1C
--                     (journal.OneCSeen as JSON), NULL when none has
--
-- The store writes the first four with journal.Derive; the rows already stored are
-- filled here by ordersync_derive, a function the store registers with the driver
-- (this migration only runs inside ordersync). No index or column uses it, so any
-- other SQLite client still reads and writes the file.
ALTER TABLE operations ADD COLUMN order_created_at INTEGER;
ALTER TABLE operations ADD COLUMN order_total TEXT;
ALTER TABLE operations ADD COLUMN currency TEXT NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN onec_seen TEXT;

UPDATE operations SET
    order_created_at = ordersync_derive('order_created_at', key, source, external_id, payload, result),
    order_total = ordersync_derive('order_total', key, source, external_id, payload, result),
    currency = coalesce(ordersync_derive('currency', key, source, external_id, payload, result), ''),
    search_text = coalesce(ordersync_derive('search_text', key, source, external_id, payload, result), '');

-- The list's period by the order's date.
CREATE INDEX operations_ordered_idx ON operations (coalesce(order_created_at, created_at));
