-- Exactly once when 1C is slow or a claim's session dies, and outages that wait
-- instead of failing.
--
-- settle_until      no attempt starts, and no cancel concludes "never created", before
--                   it: the POST of an unknown outcome plus onec.settle_time, during
--                   which 1C may still be writing the order.
-- first_attempt_at  when the first attempt since registration (or requeue) finished:
--                   worker.give_up_after counts from it.
-- unknown_attempts  attempts whose outcome was unknown: worker.max_attempts counts
--                   only these. Requeue resets it and first_attempt_at.
-- retry_class       why a pending operation waits: transient, unknown, configuration,
--                   auth, waiting; '' when it does not. When 1C answers again after
--                   failing, the transient, configuration and auth ones are due at once.
-- verify_at         a done create that was ever in doubt (an unknown outcome or an
--                   interrupted attempt) is looked up in 1C once more then.
-- warnings          what a person must look at: [{code, message, refs, numbers, at}].
ALTER TABLE operations
    ADD COLUMN settle_until     timestamptz,
    ADD COLUMN first_attempt_at timestamptz,
    ADD COLUMN unknown_attempts int  NOT NULL DEFAULT 0 CHECK (unknown_attempts >= 0),
    ADD COLUMN retry_class      text NOT NULL DEFAULT '',
    ADD COLUMN verify_at        timestamptz,
    ADD COLUMN warnings         jsonb;

-- The class of a failed attempt (transient, unknown, configuration, auth, permanent,
-- waiting); '' for done and interrupted attempts.
ALTER TABLE operation_attempts ADD COLUMN class text NOT NULL DEFAULT '';

CREATE INDEX operations_verify_idx ON operations (verify_at) WHERE verify_at IS NOT NULL;
CREATE INDEX operations_waiting_idx ON operations (next_attempt_at)
    WHERE status = 'pending' AND retry_class IN ('transient', 'configuration', 'auth');
CREATE INDEX operations_warnings_idx ON operations (updated_at DESC, key) WHERE warnings IS NOT NULL;
