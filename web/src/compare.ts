// The figures of a submission's compare matrix, from its runs.
import type { Run } from "./api";

/** Whether a run of status s has ended. */
export const ended = (s: string) => s !== "queued" && s !== "running";

export interface Cell {
  agent: string;
  model: string;
  runs: Run[];
  ended: number;
  passed: number;
  tokens: number;
  durationMs: number;
}

/** The runs grouped by agent and model, with each group's figures. */
export function matrix(runs: Run[]): { agents: string[]; models: string[]; cells: Map<string, Cell> } {
  const cells = new Map<string, Cell>();
  for (const r of runs) {
    const model = r.model ?? "";
    const k = cellKey(r.agent, model);
    let c = cells.get(k);
    if (!c) cells.set(k, (c = { agent: r.agent, model, runs: [], ended: 0, passed: 0, tokens: 0, durationMs: 0 }));
    c.runs.push(r);
    if (!ended(r.status)) continue;
    c.ended++;
    if (r.status === "succeeded") c.passed++;
    c.tokens += r.llm.input_tokens + r.llm.output_tokens;
    if (r.started_at && r.ended_at) c.durationMs += Date.parse(r.ended_at) - Date.parse(r.started_at);
  }
  const agents = [...new Set(runs.map((r) => r.agent))].sort();
  const models = [...new Set(runs.map((r) => r.model ?? ""))].sort();
  return { agents, models, cells };
}

export const cellKey = (agent: string, model: string) => `${agent}\u0000${model}`;

/**
 * pass@k of n ended runs of which c passed: the chance that at least one
 * of k runs drawn from them passed, 1 - C(n-c, k) / C(n, k).
 */
export function passAtK(n: number, c: number, k: number): number {
  if (n - c < k) return 1;
  let fail = 1;
  for (let i = n - c + 1; i <= n; i++) fail *= 1 - k / i;
  return 1 - fail;
}
