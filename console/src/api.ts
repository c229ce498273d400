// The REST client: bearer token, JSON errors `{code, message}`, and Idempotency-Keys that
// make a double click or a retried request land once. Its only caller is endpoints.ts,
// which names every URL and types it from the OpenAPI document.

import type { CurrentState } from "./types";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly current: CurrentState | null = null,
  ) {
    super(message);
  }
}

interface Options {
  body?: unknown;
  idempotencyKey?: string;
  /** The item version the user acted on: the server refuses (412) if it changed since. */
  ifMatch?: number;
  signal?: AbortSignal;
}

let token: string | null = null;
let onUnauthorized: (reason: string) => void = () => {};

export function setToken(value: string | null): void {
  token = value;
}

/** Called once with the server's reason when a request is refused for the session. */
export function whenUnauthorized(fn: (reason: string) => void): void {
  onUnauthorized = fn;
}

export async function api<T>(method: string, path: string, opts: Options = {}): Promise<T> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  if (opts.idempotencyKey) headers["idempotency-key"] = opts.idempotencyKey;
  if (opts.ifMatch !== undefined) headers["if-match"] = `"${opts.ifMatch}"`;
  const response = await fetch(path, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    signal: opts.signal,
    cache: "no-store",
  });
  if (response.status === 204) return undefined as T;
  const data = await jsonOf(response);
  if (!response.ok) throw refused(response, data, path);
  return data as T;
}

/** The answer's JSON body, or null when it has none or it is not JSON. */
async function jsonOf(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

/** The error for a refused request (and the session's end on a 401). */
function refused(response: Response, data: unknown, path: string): ApiError {
  const body = (data ?? {}) as { code?: string; message?: string; current?: CurrentState };
  const error = new ApiError(
    response.status,
    body.code ?? `http_${response.status}`,
    body.message ?? response.statusText ?? "request failed",
    body.current ?? null,
  );
  if (response.status === 401 && token && !path.startsWith("/auth/login")) {
    onUnauthorized(error.message);
  }
  return error;
}

/** What `download` saved. */
export interface Downloaded {
  filename: string;
  bytes: number;
}

/**
 * A GET whose answer is a file (an export, the audit log): fetched with the session's token,
 * which a plain link cannot carry, and handed to the browser to save under the name the
 * server gives in Content-Disposition (else `fallback`).
 */
export async function download(path: string, accept: string, fallback: string): Promise<Downloaded> {
  const headers: Record<string, string> = { accept };
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(path, { method: "GET", headers, cache: "no-store" });
  if (!response.ok) throw refused(response, await jsonOf(response), path);
  const blob = await response.blob();
  const named = /filename="?([^";]+)"?/i.exec(response.headers.get("content-disposition") ?? "");
  const filename = named?.[1] ?? fallback;
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  link.hidden = true;
  document.body.appendChild(link);
  link.click();
  link.remove();
  // The browser has taken the file once the click's task is over.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return { filename, bytes: blob.size };
}

/** A v4 UUID; `crypto.randomUUID` exists only in secure contexts (https or localhost). */
export function uuid(): string {
  if (typeof crypto.randomUUID === "function" && isSecureContext) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// One key per intent (this item, this action, at this version, with this body): asking
// twice for the same thing reuses the key, so the server answers the repeat with the first
// answer instead of acting again. A different intent gets a fresh key.
const keys = new Map<string, string>();

function keyFor(intent: string): string {
  let key = keys.get(intent);
  if (!key) {
    key = uuid();
    keys.set(intent, key);
    if (keys.size > 500) keys.delete(keys.keys().next().value as string);
  }
  return key;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A POST that changes something. The same intent always carries the same Idempotency-Key;
 * a network failure or `idempotency_in_progress` (the first request is still running on
 * some pod) is retried with it, so the action happens at most once whatever the retries.
 */
export async function act<T>(path: string, intent: string, body?: unknown, ifMatch?: number): Promise<T> {
  const idempotencyKey = keyFor(`${path}|${intent}|${ifMatch ?? ""}|${JSON.stringify(body ?? null)}`);
  let lastError: unknown = null;
  for (let attempt = 0; attempt < 8; attempt++) {
    try {
      return await api<T>("POST", path, { body: body ?? {}, idempotencyKey, ifMatch });
    } catch (e) {
      lastError = e;
      const retry =
        (e instanceof ApiError && e.code === "idempotency_in_progress") ||
        (e instanceof ApiError && e.status >= 502 && e.status <= 504) ||
        e instanceof TypeError; // fetch: network failure, the request may or may not have landed
      if (!retry) throw e;
      await sleep(Math.min(250 * 2 ** attempt, 2000));
    }
  }
  throw lastError;
}
