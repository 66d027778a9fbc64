-- The accountant's list columns (order_created_at, order_total, currency,
-- search_text) become plain columns that the store writes, as SQLite's are: the
-- values are journal.Derive's, computed by ordersync with every write of a payload
-- or a result. Computed by the server, they cost every registration and every
-- verdict a run of PL/pgSQL (an exception block, which opens a subtransaction, and
-- regular expressions) whether or not anything they read had changed; and the rule
-- was written twice, once in Go and once here.
--
-- Dropping the expressions keeps the values already stored; nothing is rewritten.
ALTER TABLE operations
    ALTER COLUMN order_created_at DROP EXPRESSION,
    ALTER COLUMN order_total DROP EXPRESSION,
    ALTER COLUMN currency DROP EXPRESSION,
    ALTER COLUMN search_text DROP EXPRESSION;

ALTER TABLE operations
    ALTER COLUMN currency SET DEFAULT '',
    ALTER COLUMN search_text SET DEFAULT '';

DROP FUNCTION ordersync_search_text(text, text, text, jsonb, jsonb);
DROP FUNCTION ordersync_order_total(jsonb);
DROP FUNCTION ordersync_order_created_at(jsonb);
DROP FUNCTION ordersync_scalar(jsonb);
