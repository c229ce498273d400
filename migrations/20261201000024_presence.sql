-- no-transaction
-- Team console, customer context: `GET /customers/{id}/conversations` pages a customer's
-- conversations by newest activity (crates/store/src/customers.rs). Presence itself lives in
-- Redis only (crates/realtime/src/presence.rs) and needs no table; this file carries the one
-- index the customer context needs. Built CONCURRENTLY so that the previous release keeps
-- writing conversations while it builds (and therefore alone in a no-transaction migration).
CREATE INDEX CONCURRENTLY conversations_customer_recent
    ON conversations (customer_id, updated_at DESC, id DESC);
