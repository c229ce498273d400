-- The expert queue's `claimed` state (an expert holds the item). Alone in its migration:
-- a new enum value cannot be used in the transaction that adds it.
ALTER TYPE queue_status ADD VALUE IF NOT EXISTS 'claimed' AFTER 'pending';
