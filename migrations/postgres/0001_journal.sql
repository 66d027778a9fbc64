-- The journal: business operations, every attempt to carry them out in 1C, and the
-- registrations that came under an existing key with another payload.
--
-- Payloads are jsonb: numbers are kept as numeric, so 1500.10 and
-- 12345678901234567890.123456789 come back exactly (jsonb does normalise key order and
-- white space; payload_sha256 is over the bytes that were registered).

CREATE TABLE operations (
    key             text        PRIMARY KEY,
    kind            text        NOT NULL CHECK (kind <> ''),
    source          text        NOT NULL DEFAULT '',
    external_id     text        NOT NULL DEFAULT '',
    status          text        NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
    payload         jsonb       NOT NULL,
    payload_sha256  text        NOT NULL,
    result          jsonb,
    attempts        int         NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error      text        NOT NULL DEFAULT '',
    next_attempt_at timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

-- The claim: SELECT … WHERE status = 'pending' AND next_attempt_at <= now
-- ORDER BY next_attempt_at, key LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED.
CREATE INDEX operations_due_idx ON operations (next_attempt_at, key) WHERE status = 'pending';

-- journal list: newest first, optionally by status or source.
CREATE INDEX operations_updated_idx ON operations (updated_at DESC, key);
CREATE INDEX operations_status_updated_idx ON operations (status, updated_at DESC, key);
CREATE INDEX operations_source_updated_idx ON operations (source, updated_at DESC, key);

-- One row per attempt, committed before 1C is called and closed after it. A row left
-- open (finished_at IS NULL) belongs to a worker that stopped; the next claim of the
-- operation closes it as 'interrupted'.
CREATE TABLE operation_attempts (
    id            bigserial   PRIMARY KEY,
    operation_key text        NOT NULL REFERENCES operations (key),
    attempt       int         NOT NULL CHECK (attempt >= 1),
    worker        text        NOT NULL DEFAULT '',
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    outcome       text        CHECK (outcome IN ('done', 'retry', 'failed', 'interrupted')),
    error         text        NOT NULL DEFAULT '',
    onec_ref      text        NOT NULL DEFAULT '',
    exchanges     jsonb,
    UNIQUE (operation_key, attempt),
    CHECK ((finished_at IS NULL) = (outcome IS NULL))
);

CREATE INDEX operation_attempts_open_idx ON operation_attempts (operation_key) WHERE finished_at IS NULL;

-- A registration under an existing key with a different payload. The saved operation
-- is never overwritten; this row is what `journal show` lists as a conflict.
CREATE TABLE operation_conflicts (
    id             bigserial   PRIMARY KEY,
    operation_key  text        NOT NULL REFERENCES operations (key),
    at             timestamptz NOT NULL,
    payload_sha256 text        NOT NULL,
    payload        jsonb       NOT NULL
);

CREATE INDEX operation_conflicts_key_idx ON operation_conflicts (operation_key, at, id);
