-- The relay's claim updates a row in place (a HOT update: no new index entries, a
-- fraction of the WAL), which PostgreSQL does only when the update changes no indexed
-- column, a partial index's condition included, and the row's page has room for the
-- new version.
--
-- Room: an outbox row is about 180 bytes, and a relay working off a backlog leases a
-- page's rows in one claim, so the page must hold a second version of each: inserts
-- fill pages to half (at 70%, 29 rows a page, fewer than half of such leases were
-- HOT; at 50%, 20 rows, more than 90%). The rest of the space is what the versions
-- that the claim and the write-back leave would take anyway, on other pages.
-- (The setting applies to pages written from now on; existing pages keep their fill.)
ALTER TABLE outbox SET (fillfactor = 50);

-- Columns: the claim writes lease_until, claim_token and attempts; outbox_leased_idx
-- named lease_until in its condition, so every claim wrote a new entry in every
-- index. The claim's probe for a later leased row of the lane reads the lane's unsent
-- rows through outbox_unsent_lane_idx instead (a lane holds few unsent rows).
DROP INDEX outbox_leased_idx;

-- outbox_aggregate_idx (aggregate_id, id) served only the operators' `outbox list
-- --aggregate` and `outbox replay`, and cost an entry on every insert and write-back.
-- The lane's unique key now leads with the aggregate, so it serves them in its place
-- (the rows of one aggregate, at every destination), and the claim's probes have
-- outbox_unsent_lane_idx, where the order of the lane's two columns does not matter.
CREATE UNIQUE INDEX outbox_aggregate_lane_sequence_key ON outbox (aggregate_id, destination, sequence);
ALTER TABLE outbox
    DROP CONSTRAINT outbox_destination_aggregate_id_sequence_key,
    ADD CONSTRAINT outbox_aggregate_lane_sequence_key UNIQUE USING INDEX outbox_aggregate_lane_sequence_key;
DROP INDEX outbox_aggregate_idx;

-- Left, each with its users:
--   outbox_pkey (id): write-backs (id = ANY), requeue by id, list pages (id < …);
--   outbox_event_id_key: the consumers' dedupe key is unique;
--   outbox_aggregate_lane_sequence_key: a lane's sequence is unique; list --aggregate,
--     replay;
--   outbox_unsent_id_idx (id) WHERE sent_at IS NULL: the claim's walk, list --unsent;
--   outbox_unsent_lane_idx (destination, aggregate_id, sequence) WHERE sent_at IS NULL:
--     the claim's lane probes;
--   outbox_sent_idx (sent_at) WHERE sent_at IS NOT NULL: prune;
--   outbox_dead_idx (id) WHERE dead_at IS NOT NULL: list --dead, requeue --all-dead.
-- Only an insert and the write-back (sent_at) add index entries; the claim adds none.
