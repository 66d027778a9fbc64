-- The accountant's journal: finding an operation by whatever number a person has at
-- hand, who or what triggered each registration, requeue and attempt, and which
-- webhook delivery brought an operation.
--
-- triggered_by on operations is the pending trigger of the next attempt: the actor
-- that registered, requeued or revised the operation ("poller:kaspi", "cli:anna",
-- …). A claim copies it onto the attempt it opens (operation_attempts.triggered_by),
-- and the attempt's verdict sets it to 'retry', so the attempts after it show that
-- the engine retried. Rows written before this migration keep '' (not recorded).
ALTER TABLE operations ADD COLUMN triggered_by text NOT NULL DEFAULT '';
ALTER TABLE operation_attempts ADD COLUMN triggered_by text NOT NULL DEFAULT '';

-- An operation's timeline besides its attempts: registered, requeued, revised, with
-- the actor that did it. Written in the statement (or transaction) that does it, so
-- an event is never missing nor recorded for something that rolled back. Actions are
-- not constrained to today's three: new ones are added without a migration.
CREATE TABLE operation_events (
    id            bigserial   PRIMARY KEY,
    operation_key text        NOT NULL REFERENCES operations (key),
    at            timestamptz NOT NULL,
    action        text        NOT NULL CHECK (action <> ''),
    actor         text        NOT NULL DEFAULT '',
    detail        text        NOT NULL DEFAULT ''
);

-- journal show: the events of one operation, oldest first.
CREATE INDEX operation_events_key_idx ON operation_events (operation_key, at, id);

-- journal list --kind and --from/--before.
CREATE INDEX operations_kind_updated_idx ON operations (kind, updated_at DESC, key);
CREATE INDEX operations_created_idx ON operations (created_at);

-- Search (journal.Filter.Query, the semantics of journal.Matches): one index per term
-- a person may type, so that each branch of the query's OR is an index scan and a
-- search never reads the whole journal. The key is the primary key. The List query
-- repeats these expressions exactly: an expression index is only used for the same
-- expression.
CREATE INDEX operations_external_id_idx ON operations (external_id);
-- 1C's external id (kaspi:512344101).
CREATE INDEX operations_onec_external_id_idx ON operations ((source || ':' || external_id));
-- The marketplace's number, its internal id, and the id a fetch payload names (an
-- Ozon posting number, a deal id).
CREATE INDEX operations_payload_number_idx ON operations ((payload ->> 'number'));
CREATE INDEX operations_payload_marketplace_id_idx ON operations ((payload ->> 'marketplace_id'));
CREATE INDEX operations_payload_fetch_id_idx ON operations ((payload -> 'fetch' ->> 'id'));
-- 1C's number (ОС-000123) and ref, compared case-insensitively. lower() folds
-- Cyrillic under any UTF-8 locale (C.UTF-8 included); the query lowers the term with
-- the same function, so index and term always agree.
CREATE INDEX operations_result_number_idx ON operations (lower(result ->> 'number')) WHERE result IS NOT NULL;
CREATE INDEX operations_result_ref_idx ON operations (lower(result ->> 'ref')) WHERE result IS NOT NULL;
-- The customer's phone by its digits, the last ten of them (all of them when there
-- are fewer): +7 701 234-56-78 and 8 701 234 56 78 are one phone. regexp_replace and
-- right are immutable, so the normalised digits can be indexed without a column the
-- writers would have to keep.
CREATE INDEX operations_phone_idx ON operations
    (right(regexp_replace(payload -> 'customer' ->> 'phone', '[^0-9]', '', 'g'), 10))
    WHERE payload -> 'customer' ->> 'phone' IS NOT NULL;

-- The deliveries that brought an operation: inbox_events whose operations array holds
-- its key (operations @> ARRAY[key]).
CREATE INDEX inbox_events_operations_idx ON inbox_events USING gin (operations);
