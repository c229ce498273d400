// The shapes of the REST API and the realtime events the console reads (see /openapi.json).

export type Channel = "slack" | "whatsapp" | "telegram" | "email";
export type QueueStatus = "pending" | "claimed" | "awaiting_client" | "snoozed" | "resolved";
export type Role = "admin" | "expert";

export interface User {
  id: string;
  email: string;
  display_name: string | null;
}

export interface Membership {
  org_id: string;
  role: Role;
}

export interface Customer {
  id: string;
  display_name: string | null;
  external_id: string;
}

export interface Draft {
  id: string | null;
  text: string;
  confidence: number | null;
  fallback: boolean;
}

export interface Item {
  id: string;
  org_id: string;
  status: QueueStatus;
  version: number;
  channel: Channel;
  conversation_id: string;
  customer: Customer;
  last_message: { preview: string; at: string } | null;
  draft: Draft | null;
  flagged: boolean;
  claimed_by: string | null;
  snoozed_until: string | null;
  sla_due_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface Delivery {
  status: string;
  provider_message_id: string | null;
  delivered_at: string | null;
  error: string | null;
}

export interface Message {
  id: string;
  direction: string;
  author: string;
  author_user_id: string | null;
  body: string;
  created_at: string;
  delivery: Delivery | null;
}

export interface Conversation {
  id: string;
  org_id: string;
  channel: Channel;
  connection_id: string;
  status: string;
  customer: Customer;
  created_at: string;
  updated_at: string;
  queue_item: Item | null;
  messages: Message[];
  next_before: string | null;
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface StoredEvent {
  seq: number;
  event: string;
  data: Record<string, unknown>;
  created_at: string;
}

export interface EventsPage {
  events: StoredEvent[];
  latest_seq: number;
  truncated: boolean;
}

export interface ActionAnswer {
  item: Item;
  message?: unknown;
}

export interface CurrentState {
  status: QueueStatus;
  version: number;
  claimed_by: string | null;
}

export interface ConnectionView {
  id: string;
  org_id: string;
  channel: Channel;
  name: string;
  settings: unknown;
  created_at: string;
  updated_at: string;
  webhook_url: string;
}
