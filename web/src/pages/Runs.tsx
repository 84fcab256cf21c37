// The task runs: one page of the list per request, newest first (so that
// the first page shows a new run at once, however many there are), filtered
// by status on the server, newest state every few seconds; the next pages
// are older runs.
import { get, type RunList } from "../api";
import { navigate, withParam } from "../router";
import { Loaded, Status, Time, useAsync, useInterval } from "../ui";

const pageSize = 100;
const statuses = ["", "queued", "running", "succeeded", "failed", "hung", "timeout", "sandbox_lost", "cancelled"];

export function Runs({ url }: { url: URL }) {
  const cursor = url.searchParams.get("cursor") ?? "";
  const batch = url.searchParams.get("batch") ?? "";
  const status = url.searchParams.get("status") ?? "";
  const q = new URLSearchParams({ limit: String(pageSize), order: "desc" });
  if (cursor) q.set("cursor", cursor);
  if (batch) q.set("batch", batch);
  if (status) q.set("status", status);
  const list = useAsync((s) => get<RunList>(`/api/v1/runs?${q}`, s), [q.toString()]);
  useInterval(list.reload, 3000);
  const link = (k: string, v: string) => withParam(url, k, v);
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
      <Loaded
        state={list}
        empty={() =>
          items.length === 0 && (
            <>
              {status || batch
                ? `No run${batch ? " of this submission" : ""}${status ? ` is ${status}` : ""}.`
                : "No task runs yet. Submit a task with: agent2env run submit TASK.yaml"}
            </>
          )
        }
      >
        {() => (
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
                    <Status status={r.status} reason={r.reason} />
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
      </Loaded>
      <nav class="pager" aria-label="pages">
        {cursor && <a href={link("cursor", "")}>Newest</a>}
        {list.data?.next_cursor && <a href={link("cursor", list.data.next_cursor)}>Older</a>}
      </nav>
    </section>
  );
}
