// Every REST endpoint the console calls, and the only place their URLs are built. Paths,
// query parameters, bodies and answers are the types generated from the server's OpenAPI
// document (api-types.ts), so a renamed field or parameter fails the type check here
// instead of at run time.

import { act, api, download } from "./api";
import type { paths } from "./api-types";
import type {
  ActionAnswer,
  ConnectionList,
  ConnectionView,
  Conversation,
  DeadLetterPage,
  EventsPage,
  InboundEventDetail,
  InboundEventPage,
  Item,
  ItemPage,
  LoginAnswer,
  MeAnswer,
  Schemas,
} from "./types";

/** The query parameters of a GET endpoint, as the document lists them. */
type QueryOf<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } }
  ? NonNullable<Q>
  : never;

/** `?a=1&b=2` from the parameters that have a value, in the order given. */
function query(params: Record<string, string | number | boolean | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") q.set(name, String(value));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

export const auth = {
  login: (body: Schemas["LoginRequest"]) => api<LoginAnswer>("POST", "/auth/login", { body }),
  me: () => api<MeAnswer>("GET", "/auth/me"),
};

/** The body each expert-queue action takes (none for most). */
export interface ActionBodies {
  claim: undefined;
  unclaim: undefined;
  release: Schemas["ReleaseBody"];
  respond: Schemas["RespondBody"];
  snooze: Schemas["SnoozeBody"];
  resolve: undefined;
  reopen: undefined;
  stop: undefined;
}
export type ActionName = keyof ActionBodies;

export const queue = {
  list: (params: QueryOf<"/expert-queue">) => api<ItemPage>("GET", `/expert-queue${query(params)}`),
  get: (id: string) => api<Item>("GET", `/expert-queue/${id}`),
  /**
   * An action on the item at the version the expert saw: refused (412) if it changed since,
   * and sent with the same Idempotency-Key however often it is repeated (see `act`).
   */
  act: <A extends ActionName>(id: string, action: A, version: number, body: ActionBodies[A]) =>
    act<ActionAnswer>(`/expert-queue/${id}/${action}`, `v${version}`, body, version),
};

export const conversations = {
  get: (id: string, params: QueryOf<"/conversations/{id}">) =>
    api<Conversation>("GET", `/conversations/${id}${query(params)}`),
};

/** A customer's conversations, newest activity first, with how each stands; and (admins) their data. */
export const customers = {
  conversations: (id: string, params: QueryOf<"/customers/{id}/conversations">) =>
    api<Schemas["CustomerConversationPage"]>("GET", `/customers/${id}/conversations${query(params)}`),
  /** Everything held about the customer, saved as one JSON document. */
  exportData: (id: string) => download(`/customers/${id}/export`, "application/json", `customer-${id}.json`),
  /** `attempt` names one confirmation: a retry of it erases once. */
  erase: (id: string, attempt: string) => act<Schemas["ErasureView"]>(`/customers/${id}/erase`, attempt),
  erasure: (id: string) => api<Schemas["ErasureView"]>("GET", `/customers/${id}/erasure`),
};

/** The org's audit log as a file: every row of the filtered range, oldest first. */
export const audit = {
  download: (params: Omit<QueryOf<"/audit">, "cursor" | "limit">, format: "csv" | "ndjson") =>
    download(
      `/audit${query(params)}`,
      format === "csv" ? "text/csv" : "application/x-ndjson",
      `audit.${format === "csv" ? "csv" : "ndjson"}`,
    ),
};

export const events = {
  /** The org's events after `after`, oldest first; see realtime.ts. */
  after: (orgId: string, after: number, limit: number) =>
    api<EventsPage>("GET", `/events${query({ org_id: orgId, after, limit } satisfies QueryOf<"/events">)}`),
};

export const connections = {
  list: (orgId: string) => api<ConnectionList>("GET", `/channel-connections${query({ org_id: orgId })}`),
  create: (body: Schemas["CreateRequest"]) => api<ConnectionView>("POST", "/channel-connections", { body }),
  remove: (id: string) => api<void>("DELETE", `/channel-connections/${id}`),
};

export const deadLetters = {
  list: (params: QueryOf<"/dead-letters">) => api<DeadLetterPage>("GET", `/dead-letters${query(params)}`),
  /** `intent` names the state the admin saw, so a repeated click retries once. */
  retry: (id: string, intent: string) => act(`/dead-letters/${id}/retry`, intent),
};

export const inboundEvents = {
  list: (params: QueryOf<"/inbound-events">) =>
    api<InboundEventPage>("GET", `/inbound-events${query(params)}`),
  get: (id: string) => api<InboundEventDetail>("GET", `/inbound-events/${id}`),
  /** `intent` names the state the admin saw, so a repeated click replays once. */
  replay: (id: string, intent: string) => act(`/inbound-events/${id}/replay`, intent),
};

export const alerts = {
  /** Incidents for an admin: the deployment-wide ones and those of the orgs they administer. */
  list: (params: QueryOf<"/alerts">) => api<Schemas["AlertList"]>("GET", `/alerts${query(params)}`),
};

/** An org's saved replies: experts list them, admins manage them. */
export const savedReplies = {
  list: (orgId: string) => api<Schemas["SavedReplyList"]>("GET", `/orgs/${orgId}/saved-replies`),
  create: (orgId: string, body: Schemas["CreateSavedReply"]) =>
    api<Schemas["SavedReplyView"]>("POST", `/orgs/${orgId}/saved-replies`, { body }),
  update: (orgId: string, id: string, body: Schemas["UpdateSavedReply"]) =>
    api<Schemas["SavedReplyView"]>("PATCH", `/orgs/${orgId}/saved-replies/${id}`, { body }),
  remove: (orgId: string, id: string) => api<void>("DELETE", `/orgs/${orgId}/saved-replies/${id}`),
};

/** A conversation's internal notes (never sent to the customer). */
export const notes = {
  list: (conversationId: string) => api<Schemas["NoteList"]>("GET", `/conversations/${conversationId}/notes`),
  /** `attempt` names one submission: a retry of it adds the note once. */
  add: (conversationId: string, body: Schemas["CreateNote"], attempt: string) =>
    act<Schemas["NoteView"]>(`/conversations/${conversationId}/notes`, attempt, body),
};

/** A message's journey: the steps of its exchange, with time, pod and trace id. */
export const journey = {
  get: (conversationId: string, messageId: string) =>
    api<Schemas["MessageJourney"]>("GET", `/conversations/${conversationId}/messages/${messageId}/journey`),
};

/** An org's members and invitations (admins), and the account pages anyone reaches. */
export const members = {
  list: (orgId: string) => api<Schemas["MemberList"]>("GET", `/orgs/${orgId}/members`),
  setRole: (orgId: string, userId: string, body: Schemas["RoleChange"]) =>
    api<Schemas["OrgMember"]>("PATCH", `/orgs/${orgId}/members/${userId}`, { body }),
  deactivate: (orgId: string, userId: string) =>
    api<Schemas["OrgMember"]>("POST", `/orgs/${orgId}/members/${userId}/deactivate`),
  reactivate: (orgId: string, userId: string) =>
    api<Schemas["OrgMember"]>("POST", `/orgs/${orgId}/members/${userId}/reactivate`),
  remove: (orgId: string, userId: string) => api<void>("DELETE", `/orgs/${orgId}/members/${userId}`),
  invitations: (orgId: string) => api<Schemas["InvitationList"]>("GET", `/orgs/${orgId}/invitations`),
  invite: (orgId: string, body: Schemas["InviteRequest"]) =>
    api<Schemas["Invited"]>("POST", `/orgs/${orgId}/invitations`, { body }),
  revokeInvitation: (orgId: string, id: string) => api<void>("DELETE", `/orgs/${orgId}/invitations/${id}`),
};

export const account = {
  previewInvitation: (body: Schemas["TokenBody"]) =>
    api<Schemas["InvitationPreview"]>("POST", "/invitations/preview", { body }),
  acceptInvitation: (body: Schemas["AcceptRequest"]) =>
    api<Schemas["Accepted"]>("POST", "/invitations/accept", { body }),
  changePassword: (body: Schemas["ChangePassword"]) =>
    api<Schemas["LoginResponse"]>("POST", "/auth/password", { body }),
  requestReset: (body: Schemas["ResetRequest"]) => api<void>("POST", "/auth/password-reset", { body }),
  confirmReset: (body: Schemas["ResetConfirm"]) => api<void>("POST", "/auth/password-reset/confirm", { body }),
};

export const reports = {
  /** What the scheduler wrote (daily, weekly, review), newest first. */
  list: (params: QueryOf<"/reports">) => api<Schemas["ReportPage"]>("GET", `/reports${query(params)}`),
  /** The reports page's numbers over a range of days (admins). */
  metrics: (params: QueryOf<"/reports/metrics">) =>
    api<Schemas["MetricsView"]>("GET", `/reports/metrics${query(params)}`),
  settings: (orgId: string) => api<Schemas["SettingsView"]>("GET", `/orgs/${orgId}/settings`),
  updateSettings: (orgId: string, body: Schemas["SettingsUpdate"]) =>
    api<Schemas["SettingsView"]>("PATCH", `/orgs/${orgId}/settings`, { body }),
};

export const autopilot = {
  get: (orgId: string) => api<Schemas["Policy"]>("GET", `/orgs/${orgId}/autopilot`),
  /** Replaces the whole policy (the org's drafts on hold go back to waiting for an expert). */
  set: (orgId: string, policy: Schemas["Policy"]) => api<Schemas["Policy"]>("PUT", `/orgs/${orgId}/autopilot`, { body: policy }),
  /** The kill switch: the policy off and every hold of the org stopped, at once. */
  pause: (orgId: string) => api<Schemas["Policy"]>("POST", `/orgs/${orgId}/autopilot/pause`),
};
