-- A second verification of a create that was ever in doubt: the same column as
-- PostgreSQL's 0011_late_verify.sql (microseconds).
ALTER TABLE operations ADD COLUMN late_verify_at INTEGER;
