-- The expert queue's `auto_pending` state: the autopilot admitted the item's draft, which
-- sends itself at `send_at` unless an expert, the customer or a pause stops it first. Alone
-- in its migration: a new enum value cannot be used in the transaction that adds it.
ALTER TYPE queue_status ADD VALUE IF NOT EXISTS 'auto_pending' AFTER 'pending';
