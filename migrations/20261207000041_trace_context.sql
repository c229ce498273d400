-- The W3C trace context (`traceparent`, `00-{trace id}-{span id}-{flags}`) that lets one
-- inbound event's path be read as one trace across pods and the queue (docs/OPERATIONS.md,
-- "Tracing"). Written only while the pods export traces; NULL otherwise and in every row
-- written before. Nullable, no default: nothing is rewritten, and the previous release
-- neither reads nor writes them.
--
-- inbound_events.traceparent: the webhook span's context, continued by the channel-inbound
--   job on whichever pod runs it (the job's payload carries it too; a job the sweeper or a
--   replay pushed links to it), and shown by the journey as the message's trace id.
ALTER TABLE inbound_events ADD COLUMN traceparent text;
-- messages.traceparent: for a customer message, the context of the job span that stored it
--   (in its event's trace); a reply answering it links its own trace there.
ALTER TABLE messages ADD COLUMN traceparent text;
-- outbox.traceparent: the context of the span that released the reply (the expert's
--   request), continued by the channel-outbound job on whichever pod sends it;
-- outbox.answers_traceparent: the answered message's traceparent, copied in the release's
--   statement, so the dispatch links to the event's trace without another read.
ALTER TABLE outbox ADD COLUMN traceparent text, ADD COLUMN answers_traceparent text;
