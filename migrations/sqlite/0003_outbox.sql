-- The transactional outbox in SQLite: the same
-- tables as PostgreSQL's (migrations/postgres/0002_outbox.sql), in SQLite's types.
-- Events are written in the same transaction as the journal's verdict and delivered
-- later by the relay, at least once, in order per lane. A lane is
-- (destination, aggregate_id): one order at one destination.
--
-- Life of a row: unsent (sent_at IS NULL) → claimed (lease_until in the future,
-- claim_token set, attempts counted) → sent (sent_at), or back to due later after a
-- failure (next_attempt_at, last_error), or dead (dead_at; it still counts as unsent
-- and so blocks its lane, unless the destination is configured on_dead: skip).
--
-- Times are INTEGER microseconds since the Unix epoch, UTC; data is the JSON text as
-- given (TEXT keeps every digit of an exact decimal); event ids and claim tokens are
-- UUIDs in their canonical lower-case text.

-- AUTOINCREMENT, as bigserial: an id is never handed out twice, even after the newest
-- rows were pruned, so an id an operator noted never names another event.
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT    NOT NULL UNIQUE,  -- the consumer's dedupe key
    destination     TEXT    NOT NULL CHECK (destination <> ''),
    aggregate_type  TEXT    NOT NULL DEFAULT '',
    aggregate_id    TEXT    NOT NULL CHECK (aggregate_id <> ''),
    sequence        INTEGER NOT NULL CHECK (sequence >= 1),
    event_type      TEXT    NOT NULL CHECK (event_type <> ''),
    data            TEXT    NOT NULL CHECK (json_valid(data)),
    occurred_at     INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    lease_until     INTEGER,
    claim_token     TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT    NOT NULL DEFAULT '',
    sent_at         INTEGER,
    dead_at         INTEGER,
    UNIQUE (destination, aggregate_id, sequence)
);

-- The per-lane counter, bumped in the enqueuing transaction by
-- INSERT … ON CONFLICT (destination, aggregate_id) DO UPDATE SET
-- last_sequence = last_sequence + 1 RETURNING last_sequence.
-- SQLite has one writer at a time, so the lane's enqueuers are serialised by the
-- write transaction itself: sequences are gap-free (a rolled-back transaction takes
-- its bump with it) and a lane's sequence n commits before n+1. Rows outlive pruned
-- events, so a lane never reuses a number.
CREATE TABLE outbox_lanes (
    destination   TEXT    NOT NULL,
    aggregate_id  TEXT    NOT NULL,
    last_sequence INTEGER NOT NULL CHECK (last_sequence >= 1),
    PRIMARY KEY (destination, aggregate_id)
) WITHOUT ROWID;

-- Destinations that answered HTTP 410 Gone: the relay claims nothing for them until an
-- operator requeues their dead events (which re-enables them).
CREATE TABLE outbox_destinations (
    name        TEXT    PRIMARY KEY,
    disabled_at INTEGER,
    reason      TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;

-- The claim walks the live unsent rows (neither sent nor dead) oldest first
-- (outbox_due_idx) and asks of each whether an earlier unsent row of its lane holds it
-- back (outbox_unsent_lane_idx) and whether a later one is in flight
-- (outbox_leased_idx). None of the three holds sent rows, so the claim's cost does not
-- grow with the sent rows the table keeps until they are pruned. (The claim names them
-- with INDEXED BY. SQLite's planner picks them without it today, statistics or not,
-- but it would be free to walk the whole table in rowid order, or to probe the full
-- lane index through a lane's sent history; INDEXED BY never lets it.)
CREATE INDEX outbox_due_idx ON outbox (id) WHERE sent_at IS NULL AND dead_at IS NULL;
CREATE INDEX outbox_unsent_lane_idx ON outbox (destination, aggregate_id, sequence) WHERE sent_at IS NULL;
CREATE INDEX outbox_leased_idx ON outbox (destination, aggregate_id, sequence) WHERE lease_until IS NOT NULL AND sent_at IS NULL;

-- Prune: DELETE … WHERE id IN (SELECT id … WHERE sent_at < ? ORDER BY sent_at LIMIT ?).
CREATE INDEX outbox_sent_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;

-- outbox list --aggregate, outbox replay --aggregate.
CREATE INDEX outbox_aggregate_idx ON outbox (aggregate_id, id);

-- outbox list --dead, outbox requeue --all-dead.
CREATE INDEX outbox_dead_idx ON outbox (id) WHERE dead_at IS NOT NULL;
