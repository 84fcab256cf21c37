// A submission's compare matrix: agents × models, each cell its runs'
// pass@1 and pass@k, tokens and duration, from the submission's run list
// (one request per page of it). A cell opens its runs; two runs chosen
// show their transcripts side by side.
import { useState } from "preact/hooks";
import { get, type LLMExchangeList, type Run, type RunList } from "../api";
import { cellKey, ended, matrix, passAtK } from "../compare";
import { withParam } from "../router";
import { Transcript } from "./Conversations";
import { Empty, ErrorBox, Loaded, Status, useAsync, useInterval } from "../ui";

/** Every run of batch: the list's pages, one request each. */
async function batchRuns(batch: string, signal: AbortSignal): Promise<Run[]> {
  const out: Run[] = [];
  for (let cursor = ""; ; ) {
    const q = new URLSearchParams({ batch, limit: "1000" });
    if (cursor) q.set("cursor", cursor);
    const page = await get<RunList>(`/api/v1/runs?${q}`, signal);
    out.push(...page.items);
    if (!page.next_cursor) return out;
    cursor = page.next_cursor;
  }
}

const pct = (x: number) => `${Math.round(x * 100)}%`;

export function Compare({ url }: { url: URL }) {
  const batch = url.searchParams.get("batch") ?? "";
  const open = url.searchParams.get("cell") ?? "";
  const runs = useAsync((s) => batchRuns(batch, s), [batch]);
  const live = runs.data?.some((r) => !ended(r.status));
  useInterval(() => live && runs.reload(), 3000);
  const [picked, setPicked] = useState<string[]>([]);
  if (!batch) return <Empty>Open a submission's matrix from the runs list: its runs' "#" link, then "Compare".</Empty>;
  if (runs.error) return <ErrorBox error={runs.error} retry={runs.reload} />;
  if (!runs.data) return <p class="loading">Loading…</p>;
  if (runs.data.length === 0) return <Empty>Submission {batch} has no runs.</Empty>;
  const m = matrix(runs.data);
  const k = Math.max(...[...m.cells.values()].map((c) => c.ended));
  const cell = m.cells.get(open);
  const byID = new Map(runs.data.map((r) => [r.id, r]));
  return (
    <section>
      <h1>
        Compare <small>submission {batch}</small>
      </h1>
      <p class="hint">
        pass@1 is the share of ended runs that succeeded; pass@{k} the chance that one of {k} runs succeeds.{" "}
        <a href={`/runs?batch=${encodeURIComponent(batch)}`}>Its runs</a>
      </p>
      <div class="scroll">
        <table class="list matrix" aria-label="agents by models">
          <thead>
            <tr>
              <th>Agent \ model</th>
              {m.models.map((mo) => (
                <th key={mo}>{mo || "(no model)"}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {m.agents.map((a) => (
              <tr key={a}>
                <th>{a}</th>
                {m.models.map((mo) => {
                  const c = m.cells.get(cellKey(a, mo));
                  if (!c) return <td key={mo} />;
                  return (
                    <td key={mo} class="cell" aria-current={open === cellKey(a, mo) ? "true" : undefined}>
                      <a href={withParam(url, "cell", cellKey(a, mo))} aria-label={`${a} × ${mo || "no model"}`}>
                        <div class="big">{c.ended ? pct(c.passed / c.ended) : "…"}</div>
                      </a>
                      <div>
                        pass@1 {c.ended ? pct(c.passed / c.ended) : "–"}, pass@{k}{" "}
                        {c.ended >= k && k > 0 ? pct(passAtK(c.ended, c.passed, k)) : "–"}
                      </div>
                      <div class="reason">
                        {c.passed}/{c.ended} passed{c.runs.length > c.ended ? `, ${c.runs.length - c.ended} going` : ""}
                      </div>
                      <div class="reason">
                        {c.ended ? Math.round(c.tokens / c.ended) : 0} tokens,{" "}
                        {c.ended ? (c.durationMs / c.ended / 1000).toFixed(1) : 0} s a run
                      </div>
                    </td>
                  );
                })}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {cell && (
        <>
          <h2>
            Runs of {cell.agent} × {cell.model || "no model"}
          </h2>
          <p class="hint">Choose two to read their transcripts side by side.</p>
          <table class="list cell-runs">
            <tbody>
              {cell.runs.map((r) => (
                <tr key={r.id}>
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`choose ${r.id}`}
                      checked={picked.includes(r.id)}
                      onChange={(e) =>
                        setPicked(
                          e.currentTarget.checked ? [...picked, r.id].slice(-2) : picked.filter((x) => x !== r.id),
                        )
                      }
                    />
                  </td>
                  <td>
                    <a href={`/runs/${encodeURIComponent(r.id)}`}>
                      <code>{r.id}</code>
                    </a>
                  </td>
                  <td>
                    <Status status={r.status} reason={r.reason} />
                  </td>
                  <td>#{r.repeat}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {picked.length > 0 && (
        <div class="side-by-side">
          {picked.map((id) => (
            <RunTranscript key={id} run={byID.get(id)!} />
          ))}
        </div>
      )}
    </section>
  );
}

/** A run's conversation: its last exchange's transcript holds every turn. */
function RunTranscript({ run }: { run: Run }) {
  const last = useAsync(
    (s) => get<LLMExchangeList>(`/api/v1/llm/exchanges?run=${encodeURIComponent(run.id)}&limit=1000`, s),
    [run.id],
  );
  return (
    <article class="side" aria-label={`transcript of ${run.id}`}>
      <h3>
        <a href={`/runs/${encodeURIComponent(run.id)}`}>
          <code>{run.id}</code>
        </a>{" "}
        <Status status={run.status} />
      </h3>
      <Loaded state={last} empty={(d) => d.items.length === 0 && "This run called no model."}>
        {(d) => <Transcript exchange={d.items[d.items.length - 1]} />}
      </Loaded>
    </article>
  );
}
