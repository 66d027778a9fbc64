-- A second verification of a create that was ever in doubt: a 1C slower than
-- onec.settle_time may commit a stale POST after the create is done and after its
-- first verification; late_verify_at (the newest doubtful POST plus onec.late_verify)
-- becomes verify_at when the first verification ends, so that duplicate is still
-- found and reported.
ALTER TABLE operations ADD COLUMN late_verify_at timestamptz;
