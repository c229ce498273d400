// An item on the autopilot's hold in the console: listed and counted as pending, and its
// countdown in words.

import { describe, expect, it } from "vitest";
import { matches, tabOf, type Filters } from "./filters";
import { sendsIn } from "./format";
import type { Item } from "./types";

const filters: Filters = { status: "pending", channel: "", flagged: false, mine: false, search: "" };

describe("an item on hold", () => {
  it("is under the pending tab, and only there", () => {
    expect(tabOf("auto_pending")).toBe("pending");
    expect(tabOf("claimed")).toBe("claimed");
    const held = { status: "auto_pending", channel: "slack", flagged: false, claimed_by: null, customer: { display_name: "Ada", external_id: "U1" }, last_message: null, draft: null } as unknown as Item;
    expect(matches(held, filters, "pending", "me")).toBe(true);
    expect(matches(held, filters, "claimed", "me")).toBe(false);
    expect(matches(held, filters, "open", "me")).toBe(true);
  });

  it("counts down in minutes and seconds, then says it is sending", () => {
    const now = Date.parse("2026-12-07T10:00:00Z");
    expect(sendsIn("2026-12-07T10:00:42Z", now)).toBe("sends itself in 0:42");
    expect(sendsIn("2026-12-07T10:02:05.200Z", now)).toBe("sends itself in 2:06");
    expect(sendsIn("2026-12-07T10:00:00Z", now)).toBe("sending now");
    expect(sendsIn("2026-12-07T09:59:00Z", now)).toBe("sending now");
  });
});
