-- The transactional outbox: events written in the
-- same transaction as the journal's verdict and delivered later by the relay, at
-- least once, in order per lane. A lane is (destination, aggregate_id): one order at
-- one destination.
--
-- Life of a row: unsent (sent_at IS NULL) → claimed (lease_until in the future,
-- claim_token set, attempts counted) → sent (sent_at), or back to due later after a
-- failure (next_attempt_at, last_error), or dead (dead_at; it still counts as unsent
-- and so blocks its lane, unless the destination is configured on_dead: skip).

CREATE TABLE outbox (
    id              bigserial   PRIMARY KEY,
    event_id        uuid        NOT NULL UNIQUE,  -- the consumer's dedupe key
    destination     text        NOT NULL CHECK (destination <> ''),
    aggregate_type  text        NOT NULL DEFAULT '',
    aggregate_id    text        NOT NULL CHECK (aggregate_id <> ''),
    sequence        bigint      NOT NULL CHECK (sequence >= 1),
    event_type      text        NOT NULL CHECK (event_type <> ''),
    data            jsonb       NOT NULL,
    occurred_at     timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    lease_until     timestamptz,
    claim_token     uuid,
    attempts        int         NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL,
    last_error      text        NOT NULL DEFAULT '',
    sent_at         timestamptz,
    dead_at         timestamptz,
    UNIQUE (destination, aggregate_id, sequence)
);

-- The per-lane counter, bumped in the enqueuing transaction by
-- INSERT … ON CONFLICT (destination, aggregate_id) DO UPDATE SET
-- last_sequence = outbox_lanes.last_sequence + 1 RETURNING last_sequence.
-- The row lock it takes serialises the lane's writers until they commit, so sequences
-- are gap-free under concurrent transactions (a rolled-back one gives its number back)
-- and a lane's sequence n always commits before n+1. Rows outlive pruned events, so a
-- lane never reuses a number.
CREATE TABLE outbox_lanes (
    destination   text   NOT NULL,
    aggregate_id  text   NOT NULL,
    last_sequence bigint NOT NULL CHECK (last_sequence >= 1),
    PRIMARY KEY (destination, aggregate_id)
);

-- Destinations that answered HTTP 410 Gone: the relay claims nothing for them until an
-- operator requeues their dead events (which re-enables them).
CREATE TABLE outbox_destinations (
    name        text        PRIMARY KEY,
    disabled_at timestamptz,
    reason      text        NOT NULL DEFAULT ''
);

-- The claim walks unsent rows oldest first (outbox_unsent_id_idx) and asks of each
-- whether an earlier unsent row of its lane holds it back (outbox_unsent_lane_idx).
-- Neither index holds sent rows, so the claim's cost does not grow with the sent rows
-- the table keeps until they are pruned.
CREATE INDEX outbox_unsent_id_idx ON outbox (id) WHERE sent_at IS NULL;
CREATE INDEX outbox_unsent_lane_idx ON outbox (destination, aggregate_id, sequence) WHERE sent_at IS NULL;
-- … and whether a later row of its lane is in flight (leased rows are few).
CREATE INDEX outbox_leased_idx ON outbox (destination, aggregate_id) WHERE lease_until IS NOT NULL AND sent_at IS NULL;

-- Prune: DELETE … WHERE id IN (SELECT id … WHERE sent_at < $1 ORDER BY sent_at LIMIT $2).
CREATE INDEX outbox_sent_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;

-- outbox list --aggregate, outbox replay --aggregate.
CREATE INDEX outbox_aggregate_idx ON outbox (aggregate_id, id);

-- outbox list --dead, outbox requeue --all-dead.
CREATE INDEX outbox_dead_idx ON outbox (id) WHERE dead_at IS NOT NULL;
