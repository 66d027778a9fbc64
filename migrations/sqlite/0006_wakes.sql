-- Wakes that could not wait for a claim's key lock (see PostgreSQL's 0007_wakes.sql).
CREATE TABLE operation_wakes (
    operation_key TEXT    PRIMARY KEY REFERENCES operations (key),
    at            INTEGER NOT NULL
) WITHOUT ROWID;
