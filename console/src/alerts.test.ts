// The admins' open-alerts banner: which incidents it shows, in what order, and when it must
// be redrawn (a redraw is announced again by screen readers).

import { describe, expect, it } from "vitest";
import { type Alert, alertLines, alertsHeading, alertsKey } from "./views/alerts";

function alert(id: string, over: Partial<Alert> = {}): Alert {
  return {
    id,
    kind: "agent_failing",
    severity: "critical",
    scope: "agent",
    org_id: null,
    status: "open",
    summary: `summary ${id}`,
    meaning: "The drafting agent failed several probes in a row.",
    runbook: "docs/OPERATIONS.md#alert-agent-failing",
    details: {},
    opened_at: "2024-05-01T10:00:00Z",
    last_seen_at: "2024-05-01T10:05:00Z",
    resolved_at: null,
    deliveries: [],
    ...over,
  };
}

const when = (iso: string) => `at ${iso.slice(11, 16)}`;

describe("the open alerts banner", () => {
  it("shows nothing when no incident is open", () => {
    const lines = alertLines([alert("r", { status: "resolved", resolved_at: "2024-05-01T11:00:00Z" })], when);
    expect(lines).toEqual([]);
    expect(alertsHeading(lines)).toBe("");
    expect(alertsKey(lines)).toBe("");
  });

  it("lists the most severe first, then the newest, with what each means", () => {
    const lines = alertLines(
      [
        alert("info", { kind: "scheduled_run_retried", severity: "info", opened_at: "2024-05-01T12:00:00Z" }),
        alert("old", { opened_at: "2024-05-01T09:00:00Z" }),
        alert("dead", { kind: "reply_dead", severity: "warning", opened_at: "2024-05-01T11:00:00Z" }),
        alert("new", { opened_at: "2024-05-01T10:30:00Z" }),
      ],
      when,
    );
    expect(lines.map((l) => l.id)).toEqual(["new", "old", "dead", "info"]);
    expect(lines[0]).toMatchObject({
      severityLabel: "Critical",
      kind: "agent_failing",
      summary: "summary new",
      opened: "at 10:30",
      meaning: "The drafting agent failed several probes in a row.",
      runbook: "docs/OPERATIONS.md#alert-agent-failing",
      action: null,
    });
    expect(lines[2].action).toEqual({ href: "#/admin/dead-letters", text: "Dead letters" });
    expect(alertsHeading(lines)).toBe("4 open alerts (2 critical)");
    expect(alertsHeading(lines.slice(0, 1))).toBe("1 open alert");
    expect(alertsHeading(lines.slice(2))).toBe("2 open alerts");
  });

  it("is redrawn only when the incidents change", () => {
    const first = alertLines([alert("a"), alert("b")], when);
    const seenAgain = alertLines([alert("b", { last_seen_at: "2024-05-01T10:09:00Z" }), alert("a")], when);
    expect(alertsKey(seenAgain)).toBe(alertsKey(first));
    expect(alertsKey(alertLines([alert("a")], when))).not.toBe(alertsKey(first));
    expect(alertsKey(alertLines([alert("a", { summary: "worse" }), alert("b")], when))).not.toBe(alertsKey(first));
  });
});
