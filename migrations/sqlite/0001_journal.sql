-- The journal in SQLite: the same tables as PostgreSQL's, in SQLite's types.
-- Times are INTEGER microseconds since the Unix epoch, UTC. Payloads are the JSON
-- text as registered (TEXT keeps every digit of an exact decimal).

CREATE TABLE operations (
    key             TEXT    PRIMARY KEY,
    kind            TEXT    NOT NULL CHECK (kind <> ''),
    source          TEXT    NOT NULL DEFAULT '',
    external_id     TEXT    NOT NULL DEFAULT '',
    status          TEXT    NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
    payload         TEXT    NOT NULL,
    payload_sha256  TEXT    NOT NULL,
    result          TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error      TEXT    NOT NULL DEFAULT '',
    next_attempt_at INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX operations_due_idx ON operations (next_attempt_at, key) WHERE status = 'pending';
CREATE INDEX operations_updated_idx ON operations (updated_at DESC, key);
CREATE INDEX operations_source_updated_idx ON operations (source, updated_at DESC, key);

CREATE TABLE operation_attempts (
    id            INTEGER PRIMARY KEY,
    operation_key TEXT    NOT NULL REFERENCES operations (key),
    attempt       INTEGER NOT NULL CHECK (attempt >= 1),
    worker        TEXT    NOT NULL DEFAULT '',
    started_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    outcome       TEXT    CHECK (outcome IN ('done', 'retry', 'failed', 'interrupted')),
    error         TEXT    NOT NULL DEFAULT '',
    onec_ref      TEXT    NOT NULL DEFAULT '',
    exchanges     TEXT,
    UNIQUE (operation_key, attempt),
    CHECK ((finished_at IS NULL) = (outcome IS NULL))
);

CREATE INDEX operation_attempts_open_idx ON operation_attempts (operation_key) WHERE finished_at IS NULL;

CREATE TABLE operation_conflicts (
    id             INTEGER PRIMARY KEY,
    operation_key  TEXT    NOT NULL REFERENCES operations (key),
    at             INTEGER NOT NULL,
    last_at        INTEGER NOT NULL,
    times          INTEGER NOT NULL DEFAULT 1 CHECK (times >= 1),
    payload_sha256 TEXT    NOT NULL,
    payload        TEXT    NOT NULL,
    UNIQUE (operation_key, payload_sha256)
);
