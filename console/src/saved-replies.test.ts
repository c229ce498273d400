import { describe, expect, it } from "vitest";
import { type SavedReply, filterReplies, insertAt, placeholderValues, renderReply, slashQuery } from "./saved-replies";

const ctx = {
  customer: { display_name: "Ana María López", external_id: "U123" },
  expert: { email: "sam.rivers@example.test" },
};

function reply(name: string, body = "x"): SavedReply {
  return { id: name, org_id: "o", name, body, created_by: null, created_at: "", updated_at: "" };
}

describe("renderReply", () => {
  it("fills every known placeholder, spaces inside the braces allowed", () => {
    expect(renderReply("Hi {{customer.first_name}}, {{ expert.name }} here ({{expert.first_name}}) for {{customer.name}}.", ctx)).toBe(
      "Hi Ana, Sam Rivers here (Sam) for Ana María López.",
    );
  });

  it("fills a placeholder used twice, and leaves unknown ones and plain braces as written", () => {
    expect(renderReply("{{customer.first_name}} {{customer.first_name}} {{order.id}} {x}", ctx)).toBe("Ana Ana {{order.id}} {x}");
  });

  it("falls back to the customer's id and the expert's display name", () => {
    const values = placeholderValues({ customer: { display_name: null, external_id: "+15550001" }, expert: { email: "a@b", display_name: "Jo Kim" } });
    expect(values).toEqual({ "customer.name": "+15550001", "customer.first_name": "+15550001", "expert.name": "Jo Kim", "expert.first_name": "Jo" });
  });

  it("never reads the filled-in values as placeholders again", () => {
    const sneaky = { ...ctx, customer: { display_name: "{{expert.name}}", external_id: "U1" } };
    expect(renderReply("Hi {{customer.name}}", sneaky)).toBe("Hi {{expert.name}}");
  });
});

describe("slashQuery", () => {
  it("finds the command at the caret at the start, after a space or a line break", () => {
    expect(slashQuery("/ref", 4)).toEqual({ start: 0, end: 4, query: "ref" });
    expect(slashQuery("Hello /re", 9)).toEqual({ start: 6, end: 9, query: "re" });
    expect(slashQuery("Hello\n/", 7)).toEqual({ start: 6, end: 7, query: "" });
  });

  it("ignores slashes inside words, URLs and text after a space", () => {
    expect(slashQuery("and/or", 6)).toBeNull();
    expect(slashQuery("see https://x.test/a", 20)).toBeNull();
    expect(slashQuery("/refund now", 11)).toBeNull();
    expect(slashQuery("no slash", 8)).toBeNull();
  });
});

describe("filterReplies", () => {
  const replies = [reply("Shipping delay"), reply("Refund sent"), reply("Apology"), reply("Partial refund"), reply("Réouverture")];

  it("lists everything by name for an empty query", () => {
    expect(filterReplies(replies, "").map((r) => r.name)).toEqual(["Apology", "Partial refund", "Refund sent", "Réouverture", "Shipping delay"]);
  });

  it("puts names that start with the query first, then word starts, then anywhere", () => {
    expect(filterReplies(replies, "ref").map((r) => r.name)).toEqual(["Refund sent", "Partial refund"]);
    expect(filterReplies(replies, "lay").map((r) => r.name)).toEqual(["Shipping delay"]);
    expect(filterReplies(replies, "REF").map((r) => r.name)).toEqual(["Refund sent", "Partial refund"]);
  });

  it("matches a name typed without its spaces", () => {
    expect(filterReplies(replies, "refundse").map((r) => r.name)).toEqual(["Refund sent"]);
    expect(filterReplies(replies, "shippingd").map((r) => r.name)).toEqual(["Shipping delay"]);
  });

  it("ignores accents and finds nothing for a query nothing matches", () => {
    expect(filterReplies(replies, "reou").map((r) => r.name)).toEqual(["Réouverture"]);
    expect(filterReplies(replies, "zzz")).toEqual([]);
  });
});

describe("insertAt", () => {
  it("replaces the slash command and puts the caret after the insert", () => {
    const text = "Hello /ref thanks";
    const at = slashQuery(text, 10)!;
    expect(insertAt(text, at, "Your refund is sent.")).toEqual({ text: "Hello Your refund is sent. thanks", caret: 26 });
  });
});
