// The compare matrix's figures (src/compare.ts, loaded with Node's type
// stripping). Run by scripts/web.sh check.
import assert from "node:assert/strict";
import { test } from "node:test";
import { cellKey, matrix, passAtK } from "../src/compare.ts";

test("pass@k is the chance that one of k runs drawn passed", () => {
  const cases = [
    // n, c, k, want
    [4, 0, 1, 0],
    [4, 4, 1, 1],
    [4, 1, 1, 0.25],
    [4, 1, 4, 1],
    [4, 1, 2, 0.5], // 1 - C(3,2)/C(4,2) = 1 - 3/6
    [5, 2, 2, 0.7], // 1 - C(3,2)/C(5,2) = 1 - 3/10
    [10, 3, 5, 1 - 21 / 252], // 1 - C(7,5)/C(10,5)
  ];
  for (const [n, c, k, want] of cases) {
    assert.ok(Math.abs(passAtK(n, c, k) - want) < 1e-12, `pass@${k} of ${c}/${n}: ${passAtK(n, c, k)}, want ${want}`);
  }
});

const run = (agent, model, status, tokens = 0, seconds = 0) => ({
  id: `${agent}-${model}-${status}-${Math.random()}`,
  agent,
  model: model || undefined,
  status,
  llm: { requests: 1, input_tokens: tokens, output_tokens: 0, cached_tokens: 0 },
  started_at: "2026-01-01T00:00:00Z",
  ended_at: new Date(Date.parse("2026-01-01T00:00:00Z") + seconds * 1000).toISOString(),
});

test("the matrix groups runs by agent and model, counting only ended runs", () => {
  const m = matrix([
    run("codex", "b", "succeeded", 10, 2),
    run("codex", "b", "failed", 30, 4),
    run("codex", "b", "running"),
    run("claude", "a", "succeeded", 5, 1),
    run("custom", "", "timeout", 7, 9),
  ]);
  assert.deepEqual(m.agents, ["claude", "codex", "custom"]);
  assert.deepEqual(m.models, ["", "a", "b"]);
  const c = m.cells.get(cellKey("codex", "b"));
  assert.equal(c.runs.length, 3);
  assert.equal(c.ended, 2);
  assert.equal(c.passed, 1);
  assert.equal(c.tokens, 40);
  assert.equal(c.durationMs, 6000);
  assert.equal(m.cells.get(cellKey("claude", "b")), undefined);
  assert.equal(m.cells.get(cellKey("custom", "")).passed, 0);
});
