-- The hold of an `auto_pending` item: when its draft sends itself, and the rule of the org's
-- autopilot that admitted it (shown on the item, recorded with the release). Both are NULL
-- in every other state; every transition clears them. Nullable, no default: nothing is
-- rewritten.
ALTER TABLE expert_queue ADD COLUMN send_at timestamptz, ADD COLUMN autopilot_rule text;
