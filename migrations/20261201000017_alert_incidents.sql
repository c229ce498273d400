-- Alert incidents: exactly one open incident per (kind, scope) across all pods (the partial
-- unique index is the claim), and their deliveries to each configured sink, retried with
-- backoff like replies. Resolved incidents keep their history for GET /alerts.
CREATE TABLE alert_incidents (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind          text NOT NULL,
    scope         text NOT NULL CHECK (length(scope) BETWEEN 1 AND 200),
    org_id        uuid REFERENCES orgs (id) ON DELETE CASCADE,
    severity      text NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
    summary       text NOT NULL,
    details       jsonb NOT NULL DEFAULT '{}'::jsonb,
    raised_by     text NOT NULL,
    opened_at     timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at   timestamptz
);
CREATE UNIQUE INDEX alert_incidents_open ON alert_incidents (kind, scope) WHERE status = 'open';
CREATE INDEX alert_incidents_recent ON alert_incidents (opened_at DESC);

CREATE TABLE alert_deliveries (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    incident_id      uuid NOT NULL REFERENCES alert_incidents (id) ON DELETE CASCADE,
    sink             text NOT NULL CHECK (sink IN ('slack', 'pagerduty', 'webhook', 'account_manager')),
    action           text NOT NULL CHECK (action IN ('trigger', 'resolve')),
    -- The account manager's address, as it was when the incident opened.
    recipient        text,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'dead')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    locked_until     timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    sent_at          timestamptz
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX alert_deliveries_incident ON alert_deliveries (incident_id);

-- Who hears about an org's dead replies.
ALTER TABLE orgs ADD COLUMN account_manager_email text
    CHECK (account_manager_email IS NULL OR length(account_manager_email) BETWEEN 3 AND 320);
