// The line diff of template versions (src/diff.ts, loaded with Node's type
// stripping). Run by scripts/web.sh check.
import assert from "node:assert/strict";
import { test } from "node:test";
import { lineDiff } from "../src/diff.ts";

const show = (a, b) =>
  lineDiff(a, b)
    .map((l) => l.op + l.text)
    .join("\n");

test("a line diff keeps the common lines and marks the rest", () => {
  const cases = [
    ["a\nb\nc", "a\nb\nc", " a\n b\n c"],
    ["a\nttl: 900\nc", "a\nttl: 600\nc", " a\n-ttl: 900\n+ttl: 600\n c"],
    ["a\nb", "a\nb\nc", " a\n b\n+c"],
    ["x\na", "a", "-x\n a"],
    ["", "a", "-\n+a"],
  ];
  for (const [a, b, want] of cases) assert.equal(show(a, b), want, `${JSON.stringify(a)} → ${JSON.stringify(b)}`);
});

test("every line of both texts is in the diff, in order", () => {
  const a = Array.from({ length: 200 }, (_, i) => `line ${i % 7} ${i % 3}`).join("\n");
  const b = Array.from({ length: 180 }, (_, i) => `line ${i % 5} ${i % 3}`).join("\n");
  const d = lineDiff(a, b);
  assert.equal(d.filter((l) => l.op !== "+").map((l) => l.text).join("\n"), a);
  assert.equal(d.filter((l) => l.op !== "-").map((l) => l.text).join("\n"), b);
});
