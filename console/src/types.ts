// The console's names for the shapes of the REST API and the realtime events. Every shape
// is generated from the server's OpenAPI document (openapi.json → api-types.ts, kept in
// step by check.sh and a Rust test); only the names are chosen here.

import type { components } from "./api-types";

export type Schemas = components["schemas"];

export type Channel = Schemas["ChannelKind"];
export type QueueStatus = Schemas["QueueStatus"];
export type DeliveryStatus = Schemas["DeliveryStatus"];
export type User = Schemas["User"];
export type Membership = Schemas["Membership"];
export type LoginAnswer = Schemas["LoginResponse"];
export type MeAnswer = Schemas["MeResponse"];

export type Item = Schemas["ItemView"];
export type ItemPage = Schemas["ItemPage"];
export type ActionAnswer = Schemas["ActionAnswer"];
export type CurrentState = Schemas["CurrentState"];

export type Conversation = Schemas["ShowResponse"];
export type Message = Schemas["MessageView"];
export type Delivery = Schemas["Delivery"];

export type ConnectionView = Schemas["ConnectionView"];
export type ConnectionList = Schemas["ConnectionList"];
export type DeadLetterPage = Schemas["DeadLetterPage"];
export type InboundEventPage = Schemas["InboundEventPage"];
export type InboundEventDetail = Schemas["EventDetailView"];

/** One realtime event: its name and the payload the socket delivers with it. */
export type RealtimeEvent = Schemas["RealtimeEvent"];
export type EventName = RealtimeEvent["event"];
export type EventData<K extends EventName> = Extract<RealtimeEvent, { event: K }>["data"];

/**
 * A page of `GET /events`. The document types `data` as any JSON; it is exactly what the
 * socket delivered, so each stored event is a `RealtimeEvent` with its number.
 */
export type EventsPage = Omit<Schemas["EventsPage"], "events"> & {
  events: (RealtimeEvent & { seq: number; created_at: string })[];
};
