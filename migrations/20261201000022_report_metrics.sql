-- The reports page (`GET /reports/metrics`) and the org's own SLA.
--
-- How long an org gives its experts to answer a customer: a queue item is due
-- `sla_minutes` after the customer message that made it pending (it was a fixed hour).
-- orgs is small: the default is a constant, so the column is added without a rewrite.
ALTER TABLE orgs ADD COLUMN sla_minutes integer NOT NULL DEFAULT 60
    CHECK (sla_minutes BETWEEN 1 AND 10080);
