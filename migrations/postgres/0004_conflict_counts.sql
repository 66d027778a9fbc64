-- A conflicting payload is recorded once per operation and counted, instead of once
-- per delivery: a poller re-reads a changed marketplace order every poll of its
-- look-back window (72 h at one poll a minute is about 4,300 polls), and a row per
-- poll buried the first record under copies. `at` stays the first sighting, `last_at`
-- is the latest, `times` how many registrations brought this payload.

DELETE FROM operation_conflicts c
USING operation_conflicts keep
WHERE keep.operation_key = c.operation_key AND keep.payload_sha256 = c.payload_sha256 AND keep.id < c.id;

ALTER TABLE operation_conflicts
    ADD COLUMN times   int         NOT NULL DEFAULT 1 CHECK (times >= 1),
    ADD COLUMN last_at timestamptz;

UPDATE operation_conflicts SET last_at = at;

ALTER TABLE operation_conflicts ALTER COLUMN last_at SET NOT NULL;

CREATE UNIQUE INDEX operation_conflicts_payload_idx ON operation_conflicts (operation_key, payload_sha256);
