-- The scheduler (issue 12): every periodic job runs once per slot across all pods, a run
-- whose pod died is retried once by another pod, alerts are raised once per window across
-- pods, orgs have a time zone for their reports, and reports are stored.

-- A run holds a lease while it works (renewed every third of it). A run still `running`
-- after its lease lapsed belongs to a dead pod: another pod takes it over with one
-- `UPDATE … WHERE status = 'running' AND lease_until < now() AND attempt = 1 RETURNING`
-- (AA2/AA5: exactly one pod wins the takeover, and only once: `attempt` becomes 2). A second
-- attempt that also dies is `abandoned`. `previous_pod` says whose run was taken over.
-- Rows written by the older per-job claim (no lease) get ten minutes.
ALTER TABLE cron_runs
    ADD COLUMN attempt      smallint NOT NULL DEFAULT 1,
    ADD COLUMN lease_until  timestamptz NOT NULL DEFAULT now() + interval '10 minutes',
    ADD COLUMN previous_pod text;
ALTER TABLE cron_runs DROP CONSTRAINT cron_runs_status_check;
ALTER TABLE cron_runs
    ADD CONSTRAINT cron_runs_status_check
        CHECK (status IN ('running', 'ok', 'failed', 'abandoned'));
-- AA2: the primary key (job, slot) stays the one lock of "one run per slot across all pods";
-- this index only finds the runs whose pod died.
CREATE INDEX cron_runs_running ON cron_runs (lease_until) WHERE status = 'running';

-- Alerts raised once per (kind, subject, window) across pods. Redis `SET NX` is the usual
-- claim; this table is the claim when Redis itself is what failed (the rate limiter's
-- storage down), so N pods still raise one alert. AA2: the primary key is the claim.
CREATE TABLE alert_claims (
    kind          text NOT NULL,
    subject       text NOT NULL,
    window_start  timestamptz NOT NULL,
    pod_id        text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, subject, window_start)
);

-- The org's time zone (an IANA name) for its daily and weekly reports.
ALTER TABLE orgs ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC'
    CHECK (length(time_zone) BETWEEN 1 AND 64);

-- Reports written by the scheduled jobs (daily-summary, weekly-report, review-summary).
-- AA3: one report per org, kind and period however often its slot is run or retried.
CREATE TABLE reports (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id        uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    kind          text NOT NULL CHECK (kind IN ('daily_summary', 'weekly_report', 'review_summary')),
    period_start  timestamptz NOT NULL,
    period_end    timestamptz NOT NULL,
    time_zone     text NOT NULL,
    data          jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX reports_period_key ON reports (org_id, kind, period_start);
-- `GET /reports` pages newest first within an org.
CREATE INDEX reports_org_recent ON reports (org_id, created_at DESC, id DESC);

-- The backlog alert looks at pending items by their SLA.
CREATE INDEX expert_queue_sla ON expert_queue (sla_due_at) WHERE status = 'pending';
