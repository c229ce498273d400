-- Fenced writes (issue 23, item 6). A lease or a claim lapses (a stalled pod, a long GC, a
-- request slower than its lease) and someone else takes it over; from then on every write
-- the former holder still makes must change nothing. The outbox already names its holder
-- (`outbox.lease_id`, 20261201000008); these columns do the same for the inbox and for
-- Idempotency-Key. Each holds a fresh uuid per claim, and every later write of that holder
-- says `… WHERE <primary key> AND claim_token = $token`. Both are read only on rows found by
-- their primary key, so neither needs an index, and adding a nullable column rewrites
-- nothing.

-- The inbox (AA5: one holder per event). The `channel-inbound` job's claim sets a fresh
-- token; its lease renewal and its failure record (attempts, last error, `retry_at`,
-- parking) name it, so a job whose lease was taken over can neither extend the new holder's
-- lease nor count its failure, back off or park the event under the new holder.
ALTER TABLE inbound_events ADD COLUMN claim_token uuid;

-- Idempotency-Key (AA3: the first request with a key answers every retry). A claim, or the
-- take-over of a claim whose lease ran out, sets a fresh token; storing the answer and giving
-- the key back name it, so a request whose claim expired and was re-claimed by a retry can
-- neither overwrite the retry's answer nor delete its row.
ALTER TABLE idempotency_keys ADD COLUMN claim_token uuid;
