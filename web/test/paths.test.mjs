// The paths the file browser takes as the sandbox's own (src/paths.ts,
// loaded with Node's type stripping). Run by scripts/web.sh check.
import assert from "node:assert/strict";
import { test } from "node:test";
import { isResolved, parent } from "../src/paths.ts";

test("a path is the sandbox's own when absolute and clean; the others it resolves", () => {
  const cases = [
    ["/", true],
    ["/workspace", true],
    ["/workspace/a b/.hidden", true],
    ["/workspace/...", true],
    ["", false],
    [".", false],
    ["sub", false],
    ["sub/deep", false],
    ["/workspace/", false],
    ["/workspace//sub", false],
    ["/workspace/./sub", false],
    ["/workspace/..", false],
    ["//", false],
  ];
  for (const [p, want] of cases) assert.equal(isResolved(p), want, p);
});

test("a folder's parent", () => {
  const cases = [
    ["/", "/"],
    ["/workspace", "/"],
    ["/workspace/sub", "/workspace"],
    ["/a/b/c", "/a/b"],
  ];
  for (const [p, want] of cases) assert.equal(parent(p), want, p);
});
