-- Exactly once when 1C is slow, and outages that wait instead of failing: the same
-- columns as PostgreSQL's 0006_doubt.sql (times in microseconds, warnings as JSON
-- text).
ALTER TABLE operations ADD COLUMN settle_until INTEGER;
ALTER TABLE operations ADD COLUMN first_attempt_at INTEGER;
ALTER TABLE operations ADD COLUMN unknown_attempts INTEGER NOT NULL DEFAULT 0 CHECK (unknown_attempts >= 0);
ALTER TABLE operations ADD COLUMN retry_class TEXT NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN verify_at INTEGER;
ALTER TABLE operations ADD COLUMN warnings TEXT;

ALTER TABLE operation_attempts ADD COLUMN class TEXT NOT NULL DEFAULT '';

CREATE INDEX operations_verify_idx ON operations (verify_at) WHERE verify_at IS NOT NULL;
CREATE INDEX operations_waiting_idx ON operations (next_attempt_at)
    WHERE status = 'pending' AND retry_class IN ('transient', 'configuration', 'auth');
CREATE INDEX operations_warnings_idx ON operations (updated_at DESC, key) WHERE warnings IS NOT NULL;
