-- One message's path through the pods, readable from the database alone
-- (`GET /conversations/{id}/messages/{message_id}/journey`, docs/OPERATIONS.md, "Reading a
-- journey"). Each row is written by the statement or transaction that made the step happen,
-- so a step exists exactly when its effect committed (docs/ARCHITECTURE.md, "The journey").
--
-- A new table: the previous release neither reads nor writes it, and its indexes are built
-- on no rows.
--
-- org_id           the message's org (retention's window, an org's deletion).
-- conversation_id  the message's conversation; NULL on the intake steps of an event whose
--                  message is not stored yet (the message statement fills it in).
-- message_id       the message the step is about: the customer's message for received,
--                  committed, queued, drafted, shown and claimed; the reply for released,
--                  attempt, delivered and dead_lettered (the reply names the message it
--                  answers, which joins the two halves of an exchange). NULL like
--                  conversation_id until the message is stored.
-- inbound_event_id the inbox event of an intake step, by which the message statement finds
--                  the steps to fill in (no foreign key: the journey outlives the inbox row,
--                  which is pruned sooner).
-- at               when the step happened: the pod's clock at the request's arrival for
--                  received, Postgres' clock in the writing statement for every other step.
-- pod              the pod that wrote it (`POD_ID`).
-- detail           numbers, ids and names of the service's own users: never a customer's
--                  text, name, phone number or email, nor a provider's words.
-- trace_id         the W3C trace id of the span that wrote it, while tracing is on.
CREATE TABLE message_journey (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id            uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    conversation_id   uuid,
    message_id        uuid,
    inbound_event_id  uuid,
    step              text NOT NULL CHECK (step IN (
                        'received', 'committed', 'queued', 'drafted', 'shown', 'claimed',
                        'released', 'attempt', 'delivered', 'dead_lettered')),
    at                timestamptz NOT NULL,
    pod               text NOT NULL,
    detail            jsonb NOT NULL DEFAULT '{}'::jsonb,
    trace_id          text
);
-- The endpoint's read (the steps of an exchange's messages, by time), and erasure's delete.
CREATE INDEX message_journey_message ON message_journey (message_id, at);
-- The message statement's fill-in of an event's intake steps, and erasure's delete of the
-- steps of events that became no message.
CREATE INDEX message_journey_event ON message_journey (inbound_event_id)
    WHERE inbound_event_id IS NOT NULL;
-- Retention's batches (`org_id`, time), as on every table it purges.
CREATE INDEX message_journey_org_at ON message_journey (org_id, at);
