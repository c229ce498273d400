import { describe, expect, it } from "vitest";
import { ApiError } from "./api";
import { accountProblem, accountRoute } from "./views/account";
import { memberProblem, memberStatus } from "./views/members";

describe("account routes", () => {
  it("names the accept and reset pages and their token, nothing else", () => {
    expect(accountRoute("#/accept/abc_DEF-123")).toEqual({ page: "accept", token: "abc_DEF-123" });
    expect(accountRoute("#/reset/xyz")).toEqual({ page: "reset", token: "xyz" });
    expect(accountRoute("#/accept/")).toBeNull();
    expect(accountRoute("#/accept/a/b")).toBeNull();
    expect(accountRoute("#/admin/members")).toBeNull();
    expect(accountRoute("#/queue")).toBeNull();
  });
});

describe("what refusals say", () => {
  it("explains each dead link and a wrong password", () => {
    expect(accountProblem(new ApiError(410, "invitation_used", "x"))).toMatch(/accepted already/);
    expect(accountProblem(new ApiError(410, "invitation_expired", "x"))).toMatch(/expired/);
    expect(accountProblem(new ApiError(410, "reset_used", "x"))).toMatch(/used already/);
    expect(accountProblem(new ApiError(401, "unauthorized", "x"))).toMatch(/not the password/);
    expect(accountProblem(new ApiError(422, "validation_failed", "password too short"))).toBe("password too short");
  });

  it("says why an admin action was refused", () => {
    expect(memberProblem(new ApiError(409, "last_admin", "x"), "remove")).toMatch(/at least one active admin/);
    expect(memberProblem(new ApiError(403, "forbidden", "x"), "invite")).toBe("Only an admin of this org can invite.");
  });

  it("shows a member's status", () => {
    expect(memberStatus({ deactivated_at: null, account_deactivated: false })).toBe("Active");
    expect(memberStatus({ deactivated_at: "2026-01-01T00:00:00Z", account_deactivated: false })).toBe("Deactivated");
    expect(memberStatus({ deactivated_at: null, account_deactivated: true })).toBe("Locked by an operator");
  });
});
