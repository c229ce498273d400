-- The org's autopilot policy (`PUT /orgs/{id}/autopilot`, switchboard_domain::autopilot):
-- NULL until an admin sets one, which reads as off. A nullable column without a default:
-- adding it rewrites nothing.
ALTER TABLE orgs ADD COLUMN autopilot jsonb;
