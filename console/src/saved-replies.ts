// Saved replies in the reply box: what `/` and a few letters match, and how a reply's
// placeholders are filled from the conversation's customer and the logged-in expert. The
// server refuses, when a reply is saved, any placeholder not in PLACEHOLDERS
// (crates/api/src/http/saved_replies.rs keeps the same list), so every one a stored reply
// holds can be filled here; the expert sees the filled text in the composer, edits it if
// need be, and what they send is what they saw.

import type { Schemas } from "./types";

export type SavedReply = Schemas["SavedReplyView"];

export const PLACEHOLDERS = ["customer.name", "customer.first_name", "expert.name", "expert.first_name"] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

/** Who the reply is from and to. */
export interface ReplyContext {
  customer: { display_name?: string | null; external_id: string };
  expert: { email: string; display_name?: string | null };
}

function firstWord(s: string): string {
  return s.trim().split(/\s+/)[0] ?? "";
}

/** An address's local part as a name: `ana.lopez@x` → `Ana Lopez`. */
function nameFromEmail(email: string): string {
  const local = email.split("@")[0] ?? email;
  return local
    .split(/[._+-]+/)
    .filter(Boolean)
    .map((w) => w[0].toUpperCase() + w.slice(1))
    .join(" ");
}

/** The value of each placeholder for this conversation and expert. */
export function placeholderValues(ctx: ReplyContext): Record<Placeholder, string> {
  const customer = ctx.customer.display_name?.trim() || ctx.customer.external_id;
  const expert = ctx.expert.display_name?.trim() || nameFromEmail(ctx.expert.email);
  return {
    "customer.name": customer,
    "customer.first_name": firstWord(customer),
    "expert.name": expert,
    "expert.first_name": firstWord(expert),
  };
}

/**
 * The reply's text with every known placeholder (`{{customer.name}}`, spaces inside the
 * braces allowed) filled in. Anything else is left as written: the server never stores
 * an unknown one, and a left-over `{{…}}` is there for the expert to see and fix.
 */
export function renderReply(body: string, ctx: ReplyContext): string {
  const values = placeholderValues(ctx);
  return body.replace(/\{\{\s*([a-z_.]+)\s*\}\}/g, (whole, name: string) =>
    (PLACEHOLDERS as readonly string[]).includes(name) ? values[name as Placeholder] : whole,
  );
}

/** The `/query` being typed at the caret: where the slash is and the letters after it. */
export interface SlashQuery {
  start: number;
  end: number;
  query: string;
}

/**
 * The slash command the caret is in, if any: a `/` at the start of the text or after a
 * space or line break, followed by letters (no space) up to the caret. `a/b` and URLs do
 * not open the picker.
 */
export function slashQuery(text: string, caret: number): SlashQuery | null {
  let i = caret - 1;
  while (i >= 0 && !/[\s/]/.test(text[i])) i--;
  if (i < 0 || text[i] !== "/") return null;
  if (i > 0 && !/\s/.test(text[i - 1])) return null;
  const query = text.slice(i + 1, caret);
  if (query.length > 40) return null;
  return { start: i, end: caret, query };
}

/**
 * The replies whose name matches `query`, best first: names that start with it, then
 * names with a word that starts with it, then names that contain it; case, accents and
 * the spaces of the name ignored; ties by name.
 */
export function filterReplies(replies: readonly SavedReply[], query: string): SavedReply[] {
  const fold = (s: string) => s.normalize("NFD").replace(/\p{Diacritic}/gu, "").toLowerCase();
  const q = fold(query.trim());
  const ranked: [number, SavedReply][] = [];
  for (const r of replies) {
    const name = fold(r.name);
    // Typed without spaces (a space ends the command): "refundsent" is "Refund sent".
    const compact = name.replace(/[^\p{L}\p{N}]+/gu, "");
    const rank = !q
      ? 0
      : name.startsWith(q) || compact.startsWith(q)
        ? 0
        : name.split(/[^\p{L}\p{N}]+/u).some((w) => w.startsWith(q))
          ? 1
          : name.includes(q) || compact.includes(q)
            ? 2
            : -1;
    if (rank >= 0) ranked.push([rank, r]);
  }
  ranked.sort((a, b) => a[0] - b[0] || a[1].name.localeCompare(b[1].name));
  return ranked.map(([, r]) => r);
}

/** `text` with the slash command replaced by `insert`, and where the caret goes after it. */
export function insertAt(text: string, at: SlashQuery, insert: string): { text: string; caret: number } {
  return { text: text.slice(0, at.start) + insert + text.slice(at.end), caret: at.start + insert.length };
}
