-- Wakes that could not wait: a webhook that wakes an operation (a Bitrix24 deal
-- update) while a claim holds its row records the wake here and answers at once,
-- instead of waiting for the claim's 1C call. The claim's Finish applies it (the
-- operation is due now unless it ended done), and the engine applies any left over
-- (a wake that committed just after the Finish) within a poll interval.
CREATE TABLE operation_wakes (
    operation_key text        PRIMARY KEY REFERENCES operations (key),
    at            timestamptz NOT NULL
);
