-- The webhook inbox: every event a sender pushes, unique under (source,
-- event_id), stored in the same transaction as the journal operations it registers.
-- A redelivery is answered from this row (the saved answer, the saved operations)
-- without a write; the same id with another body is a row in inbox_conflicts.
--
-- Written once by the receiving statement (INSERT … ON CONFLICT (source, event_id)
-- DO NOTHING) and never updated. status is 'processed' for every stored event: the
-- other outcomes (duplicate, conflict, in progress) store no event of their own.

CREATE TABLE inbox_events (
    source              text        NOT NULL CHECK (source <> ''),
    event_id            text        NOT NULL CHECK (event_id <> ''),
    body_sha256         text        NOT NULL,   -- hex SHA-256 of the raw body, as verified
    body                bytea       NOT NULL,   -- the raw bytes
    content_type        text,
    status              text        NOT NULL CHECK (status IN ('processed')),
    received_at         timestamptz NOT NULL,
    answer_status       int         NOT NULL CHECK (answer_status BETWEEN 100 AND 599),
    answer_content_type text,
    answer_body         bytea,
    operations          text[]      NOT NULL DEFAULT '{}',  -- journal keys the event registered
    PRIMARY KEY (source, event_id)
);

-- inbox list: newest first (received_at DESC, source, event_id), a --source filtered
-- along the way. Deliberately no index that leads with source: a lookup by
-- (source, event_id) must find nothing to prefer over the primary key (a planner
-- without statistics yet picked (source, received_at, event_id) and scanned every
-- event of the source).
CREATE INDEX inbox_events_received_idx ON inbox_events (received_at DESC, source, event_id);

-- A delivery that reused an event id with another body: one row per such delivery,
-- the stored event untouched.
CREATE TABLE inbox_conflicts (
    id          bigserial   PRIMARY KEY,
    source      text        NOT NULL,
    event_id    text        NOT NULL,
    at          timestamptz NOT NULL,
    body_sha256 text        NOT NULL,
    body        bytea       NOT NULL,
    FOREIGN KEY (source, event_id) REFERENCES inbox_events (source, event_id)
);

CREATE INDEX inbox_conflicts_event_idx ON inbox_conflicts (source, event_id, at, id);
