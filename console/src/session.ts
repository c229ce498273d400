// The login session: a bearer token kept in this browser's storage until it expires or the
// expert logs out. An expired or refused token sends the expert back to the login screen
// with the reason.

import { setToken, whenUnauthorized } from "./api";
import { auth } from "./endpoints";
import type { Membership, User } from "./types";

const KEY = "switchboard.session";
const ORG_KEY = "switchboard.org";

export interface Session {
  token: string;
  expiresAt: string;
  user: User;
  orgs: Membership[];
  orgId: string;
}

let current: Session | null = null;
let expiryTimer: number | undefined;
const listeners: ((s: Session | null, reason: string | null) => void)[] = [];

export function session(): Session | null {
  return current;
}

export function onSessionChange(fn: (s: Session | null, reason: string | null) => void): void {
  listeners.push(fn);
}

function set(next: Session | null, reason: string | null): void {
  current = next;
  setToken(next?.token ?? null);
  window.clearTimeout(expiryTimer);
  if (next) {
    localStorage.setItem(KEY, JSON.stringify(next));
    localStorage.setItem(ORG_KEY, next.orgId);
    const left = Date.parse(next.expiresAt) - Date.now();
    // setTimeout's delay is a 32-bit number; longer sessions are checked again later.
    expiryTimer = window.setTimeout(
      () => (Date.parse(next.expiresAt) <= Date.now() ? expire("Your session expired. Please log in again.") : set(next, null)),
      Math.min(Math.max(left, 0), 2 ** 31 - 1),
    );
  } else {
    localStorage.removeItem(KEY);
  }
  for (const fn of listeners) fn(next, reason);
}

export function expire(reason: string): void {
  if (current) set(null, reason);
}

export function logout(): void {
  set(null, "You are logged out.");
}

export function selectOrg(orgId: string): void {
  if (current && current.orgs.some((m) => m.org_id === orgId)) set({ ...current, orgId }, null);
}

export function role(): string | null {
  return current?.orgs.find((m) => m.org_id === current?.orgId)?.role ?? null;
}

export async function login(email: string, password: string): Promise<Session> {
  const answer = await auth.login({ email, password });
  return adoptToken(answer.token, answer.expires_at, null);
}

/**
 * Starts a session with a token the server just issued (a login, an accepted invitation, a
 * changed password), in `orgId` when given, else the current or remembered org.
 */
export async function adoptToken(token: string, expiresAt: string, orgId: string | null): Promise<Session> {
  setToken(token);
  whenUnauthorized((message) => expire(`Your session ended (${message}). Please log in again.`));
  const me = await auth.me();
  if (me.orgs.length === 0) {
    setToken(current?.token ?? null);
    throw new Error("This account is not a member of any org yet.");
  }
  const wanted = orgId ?? current?.orgId ?? localStorage.getItem(ORG_KEY);
  const org = me.orgs.some((m) => m.org_id === wanted) ? (wanted as string) : me.orgs[0].org_id;
  const next = { token, expiresAt, user: me.user, orgs: me.orgs, orgId: org };
  set(next, null);
  return next;
}

/** The session stored by an earlier visit, if it is still valid. */
export function restore(): Session | null {
  whenUnauthorized((message) => expire(`Your session ended (${message}). Please log in again.`));
  const raw = localStorage.getItem(KEY);
  if (!raw) return null;
  try {
    const s = JSON.parse(raw) as Session;
    if (!s.token || Date.parse(s.expiresAt) <= Date.now()) {
      localStorage.removeItem(KEY);
      return null;
    }
    set(s, null);
    return s;
  } catch {
    localStorage.removeItem(KEY);
    return null;
  }
}

/** Re-reads the memberships (a role may have changed since the login). */
export async function refreshMemberships(): Promise<void> {
  if (!current) return;
  const me = await auth.me();
  const orgId = me.orgs.some((m) => m.org_id === current?.orgId) ? current.orgId : me.orgs[0]?.org_id;
  if (!orgId) {
    expire("You are no longer a member of any org.");
    return;
  }
  current = { ...current, user: me.user, orgs: me.orgs, orgId };
  localStorage.setItem(KEY, JSON.stringify(current));
}
