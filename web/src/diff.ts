// A line diff of two texts (a template version's YAML against another's).

export interface DiffLine {
  op: " " | "-" | "+";
  text: string;
}

/** Beyond this many line pairs the diff is all of a removed, then all of b added. */
const maxPairs = 4_000_000;

/** The lines of a and b, each kept, removed (only in a) or added (only in b): a longest common subsequence's. */
export function lineDiff(a: string, b: string): DiffLine[] {
  const x = a.split("\n");
  const y = b.split("\n");
  const n = x.length;
  const m = y.length;
  if (n * m > maxPairs)
    return [...x.map((text) => ({ op: "-" as const, text })), ...y.map((text) => ({ op: "+" as const, text }))];
  // common[i][j]: the longest common subsequence of x[i:] and y[j:].
  const common = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      common[i][j] = x[i] === y[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push({ op: " ", text: x[i] });
      i++;
      j++;
    } else if (common[i + 1][j] >= common[i][j + 1]) out.push({ op: "-", text: x[i++] });
    else out.push({ op: "+", text: y[j++] });
  }
  while (i < n) out.push({ op: "-", text: x[i++] });
  while (j < m) out.push({ op: "+", text: y[j++] });
  return out;
}
