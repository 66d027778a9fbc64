-- The accountant's journal in SQLite: the same as PostgreSQL's
-- 0009_accountant_journal.sql (triggers, the timeline of events, search, the
-- deliveries of an operation), in SQLite's terms. Times are INTEGER microseconds
-- since the Unix epoch, UTC.
--
-- triggered_by on operations is the pending trigger of the next attempt; a claim
-- copies it onto its attempt, and the attempt's verdict sets it to 'retry'. Rows
-- written before this migration keep '' (not recorded).
ALTER TABLE operations ADD COLUMN triggered_by TEXT NOT NULL DEFAULT '';
ALTER TABLE operation_attempts ADD COLUMN triggered_by TEXT NOT NULL DEFAULT '';

-- An operation's timeline besides its attempts: registered, requeued, revised, with
-- the actor that did it, written in the transaction that does it.
CREATE TABLE operation_events (
    id            INTEGER PRIMARY KEY,
    operation_key TEXT    NOT NULL REFERENCES operations (key),
    at            INTEGER NOT NULL,
    action        TEXT    NOT NULL CHECK (action <> ''),
    actor         TEXT    NOT NULL DEFAULT '',
    detail        TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX operation_events_key_idx ON operation_events (operation_key, at, id);

-- journal list --kind and --from/--before.
CREATE INDEX operations_kind_updated_idx ON operations (kind, updated_at DESC, key);
CREATE INDEX operations_created_idx ON operations (created_at);

-- Search (journal.Filter.Query, the semantics of journal.Matches): one index per
-- term, so that SQLite answers the query's OR from the indexes (its OR optimisation)
-- and never reads the whole journal. The List query repeats these expressions
-- exactly: an expression index is only used for the same expression.
CREATE INDEX operations_external_id_idx ON operations (external_id);
CREATE INDEX operations_onec_external_id_idx ON operations (source || ':' || external_id);
CREATE INDEX operations_payload_number_idx ON operations (json_extract(payload, '$.number'));
CREATE INDEX operations_payload_marketplace_id_idx ON operations (json_extract(payload, '$.marketplace_id'));
CREATE INDEX operations_payload_fetch_id_idx ON operations (json_extract(payload, '$.fetch.id'));

-- What SQL alone cannot compute here is kept in columns the store writes with the
-- payload and the result: SQLite's lower() folds ASCII only (1C numbers are
-- Cyrillic: ОС-000123), and it has no regexp_replace for the phone's digits.
--   search_phone          the customer phone's digits, the last ten of them (all of
--                         them when there are fewer); '' when there is none
--   search_result_number  1C's number and ref, case-folded; '' when not done
--   search_result_ref
-- The rows already stored are filled here by ordersync_phone_tail and ordersync_fold,
-- functions the store registers with the driver: this migration only runs inside
-- ordersync. No index or column uses them, so any other SQLite client still reads
-- and writes the file.
ALTER TABLE operations ADD COLUMN search_phone TEXT NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN search_result_number TEXT NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN search_result_ref TEXT NOT NULL DEFAULT '';
UPDATE operations SET
    search_phone = ordersync_phone_tail(payload),
    search_result_number = ordersync_fold(coalesce(json_extract(result, '$.number'), '')),
    search_result_ref = ordersync_fold(coalesce(json_extract(result, '$.ref'), ''));
CREATE INDEX operations_search_phone_idx ON operations (search_phone) WHERE search_phone <> '';
CREATE INDEX operations_search_result_number_idx ON operations (search_result_number) WHERE search_result_number <> '';
CREATE INDEX operations_search_result_ref_idx ON operations (search_result_ref) WHERE search_result_ref <> '';

-- The deliveries that brought an operation: one row per key of each event's
-- operations array, written with the event. The array stays the event's record; this
-- table is its index (json_each cannot be indexed).
CREATE TABLE inbox_event_operations (
    operation_key TEXT NOT NULL,
    source        TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    PRIMARY KEY (operation_key, source, event_id),
    FOREIGN KEY (source, event_id) REFERENCES inbox_events (source, event_id)
) WITHOUT ROWID;

INSERT INTO inbox_event_operations (operation_key, source, event_id)
SELECT DISTINCT k.value, e.source, e.event_id FROM inbox_events e, json_each(e.operations) k
WHERE k.type = 'text';
