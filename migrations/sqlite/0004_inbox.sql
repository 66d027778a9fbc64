-- The webhook inbox in SQLite: the same tables as PostgreSQL's
-- (migrations/postgres/0005_inbox.sql), in SQLite's types. Every event a sender
-- pushes, unique under (source, event_id), stored in the same transaction as the
-- journal operations it registers. A redelivery is answered from this row (the saved
-- answer, the saved operations) without a write; the same id with another body is a
-- row in inbox_conflicts.
--
-- Written once by the receiving transaction (INSERT … ON CONFLICT (source, event_id)
-- DO NOTHING) and never updated. status is 'processed' for every stored event: the
-- other outcomes (duplicate, conflict, in progress) store no event of their own.
-- Times are INTEGER microseconds since the Unix epoch, UTC; operations is a JSON
-- array of the journal keys the event registered.

CREATE TABLE inbox_events (
    source              TEXT    NOT NULL CHECK (source <> ''),
    event_id            TEXT    NOT NULL CHECK (event_id <> ''),
    body_sha256         TEXT    NOT NULL,   -- hex SHA-256 of the raw body, as verified
    body                BLOB    NOT NULL,   -- the raw bytes
    content_type        TEXT,
    status              TEXT    NOT NULL CHECK (status IN ('processed')),
    received_at         INTEGER NOT NULL,
    answer_status       INTEGER NOT NULL CHECK (answer_status BETWEEN 100 AND 599),
    answer_content_type TEXT,
    answer_body         BLOB,
    operations          TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(operations)),
    PRIMARY KEY (source, event_id)
);

-- inbox list: newest first (received_at DESC, source, event_id).
CREATE INDEX inbox_events_received_idx ON inbox_events (received_at DESC, source, event_id);

-- A delivery that reused an event id with another body: one row per such delivery,
-- the stored event untouched.
CREATE TABLE inbox_conflicts (
    id          INTEGER PRIMARY KEY,
    source      TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    body_sha256 TEXT    NOT NULL,
    body        BLOB    NOT NULL,
    FOREIGN KEY (source, event_id) REFERENCES inbox_events (source, event_id)
);

CREATE INDEX inbox_conflicts_event_idx ON inbox_conflicts (source, event_id, at, id);
