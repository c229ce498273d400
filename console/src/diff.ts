// A word diff between the agent's draft and the reply that was sent, for admins reading a
// conversation: which words the expert removed and which they added. A longest common
// subsequence over words (whitespace kept with the word before it), which is plenty for
// replies of a few hundred words.

export type Part = { kind: "same" | "removed" | "added"; text: string };

function words(s: string): string[] {
  return s.match(/\S+\s*/g) ?? [];
}

/** The parts that turn `before` into `after`, in order, runs of one kind merged. */
export function wordDiff(before: string, after: string): Part[] {
  const a = words(before);
  const b = words(after);
  // lcs[i][j]: the longest common subsequence of a[i..] and b[j..] (trailing space ignored).
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  const same = (i: number, j: number) => a[i].trim() === b[j].trim();
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = same(i, j) ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const parts: Part[] = [];
  const push = (kind: Part["kind"], text: string) => {
    const last = parts[parts.length - 1];
    if (last && last.kind === kind) last.text += text;
    else parts.push({ kind, text });
  };
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (same(i, j)) {
      push("same", b[j]);
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) {
      push("removed", a[i++]);
    } else {
      push("added", b[j++]);
    }
  }
  while (i < a.length) push("removed", a[i++]);
  while (j < b.length) push("added", b[j++]);
  return parts;
}
