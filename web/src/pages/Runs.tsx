// The task runs: one page of the list per request, filtered by status on
// the server, newest state every few seconds.
import { get, type RunList } from "../api";
import { navigate } from "../router";
import { Empty, ErrorBox, Status, Time, useAsync, useInterval } from "../ui";

const pageSize = 100;
const statuses = ["", "queued", "running", "succeeded", "failed", "hung", "timeout", "sandbox_lost", "cancelled"];

export function Runs({ url }: { url: URL }) {
  const cursor = url.searchParams.get("cursor") ?? "";
  const batch = url.searchParams.get("batch") ?? "";
  const status = url.searchParams.get("status") ?? "";
  const q = new URLSearchParams({ limit: String(pageSize) });
  if (cursor) q.set("cursor", cursor);
  if (batch) q.set("batch", batch);
  if (status) q.set("status", status);
  const list = useAsync((s) => get<RunList>(`/api/v1/runs?${q}`, s), [q.toString()]);
  useInterval(list.reload, 3000);
  const link = (k: string, v: string) => {
    const u = new URL(url);
    if (k !== "cursor") u.searchParams.delete("cursor");
    if (v) u.searchParams.set(k, v);
    else u.searchParams.delete(k);
    return u.pathname + u.search;
  };
  const items = list.data?.items ?? [];
  return (
    <section>
      <h1>Task runs{batch && <small> of submission {batch}</small>}</h1>
      <div class="filters">
        <label>
          Status{" "}
          <select value={status} onChange={(e) => navigate(link("status", e.currentTarget.value))}>
            {statuses.map((s) => (
              <option key={s} value={s}>
                {s || "any"}
              </option>
            ))}
          </select>
        </label>
        {batch && <a href={`/runs/compare?batch=${encodeURIComponent(batch)}`}>Compare agents × models</a>}
        {batch && <a href={link("batch", "")}>All submissions</a>}
      </div>
      {list.error ? (
        <ErrorBox error={list.error} retry={list.reload} />
      ) : !list.data ? (
        <p class="loading">Loading…</p>
      ) : items.length === 0 ? (
        <Empty>
          {status || batch
            ? `No run${batch ? " of this submission" : ""}${status ? ` is ${status}` : ""}.`
            : "No task runs yet. Submit a task with: agent2env run submit TASK.yaml"}
        </Empty>
      ) : (
        <table class="list">
          <thead>
            <tr>
              <th>Run</th>
              <th>Status</th>
              <th>Task</th>
              <th>Agent × model</th>
              <th>Tokens</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {items.map((r) => (
              <tr key={r.id}>
                <td>
                  <a href={`/runs/${encodeURIComponent(r.id)}`}>
                    <code>{r.id}</code>
                  </a>
                </td>
                <td>
                  <Status status={r.status} />
                  {r.reason && <div class="reason">{r.reason}</div>}
                </td>
                <td>
                  {r.task} <a href={link("batch", r.batch_id)}>#{r.repeat}</a>
                </td>
                <td>
                  {r.agent}
                  {r.model ? ` × ${r.model}` : ""}
                </td>
                <td>{r.llm.input_tokens + r.llm.output_tokens || ""}</td>
                <td>
                  <Time iso={r.created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <nav class="pager" aria-label="pages">
        {cursor && <a href={link("cursor", "")}>First page</a>}
        {list.data?.next_cursor && <a href={link("cursor", list.data.next_cursor)}>Next page</a>}
      </nav>
    </section>
  );
}
