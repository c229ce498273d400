// The word diff an admin sees under a reply that differs from its draft.

import { describe, expect, it } from "vitest";
import { wordDiff } from "./diff";

describe("wordDiff", () => {
  it("marks the words removed and added, in order", () => {
    expect(wordDiff("We open at nine.", "We open at ten, sharp.")).toEqual([
      { kind: "same", text: "We open at " },
      { kind: "removed", text: "nine." },
      { kind: "added", text: "ten, sharp." },
    ]);
  });

  it("is all the same for equal texts, and all new from nothing", () => {
    expect(wordDiff("a b c", "a b c")).toEqual([{ kind: "same", text: "a b c" }]);
    expect(wordDiff("", "hello there")).toEqual([{ kind: "added", text: "hello there" }]);
    expect(wordDiff("bye now", "")).toEqual([{ kind: "removed", text: "bye now" }]);
  });
});
