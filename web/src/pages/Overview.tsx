// Counts, capacity and warm pools from the stats endpoint, and the recent
// failures: runs and sandboxes that failed, from their lists filtered by
// status on the server.
import { get, type RunList, type SandboxList, type Stats } from "../api";
import { bytes } from "../format";
import { Empty, ErrorBox, Status, Time, useAsync, useInterval } from "../ui";

const failedRuns = "failed,hung,timeout,sandbox_lost";
const shown = 8;

/** The newest failures of a list: one page, newest first, filtered by the server. */
const newest = (list: string, status: string) => `/api/v1/${list}?status=${status}&order=desc&limit=${shown}`;

function Failures() {
  const runs = useAsync(async (s) => (await get<RunList>(newest("runs", failedRuns), s)).items, []);
  const sandboxes = useAsync(async (s) => (await get<SandboxList>(newest("sandboxes", "failed"), s)).items, []);
  useInterval(() => {
    runs.reload();
    sandboxes.reload();
  }, 15000);
  return (
    <>
      <h2>Recent failures</h2>
      {runs.error ? (
        <ErrorBox error={runs.error} retry={runs.reload} />
      ) : sandboxes.error ? (
        <ErrorBox error={sandboxes.error} retry={sandboxes.reload} />
      ) : !runs.data || !sandboxes.data ? (
        <p class="loading">Loading…</p>
      ) : runs.data.length + sandboxes.data.length === 0 ? (
        <Empty>No run or sandbox has failed.</Empty>
      ) : (
        <table class="list failures" aria-label="recent failures">
          <tbody>
            {runs.data.map((r) => (
              <tr key={r.id}>
                <td>
                  <a href={`/runs/${encodeURIComponent(r.id)}`}>run {r.id}</a>
                  <div class="reason">
                    {r.task}, {r.agent}
                    {r.model ? ` × ${r.model}` : ""}
                  </div>
                </td>
                <td>
                  <Status status={r.status} reason={r.reason} />
                </td>
                <td>
                  <Time iso={r.ended_at ?? r.created_at} />
                </td>
              </tr>
            ))}
            {sandboxes.data.map((sb) => (
              <tr key={sb.id}>
                <td>
                  <a href={`/sandboxes/${encodeURIComponent(sb.id)}`}>sandbox {sb.id}</a>
                  <div class="reason">{sb.template ?? sb.image}</div>
                </td>
                <td>
                  <Status status={sb.state} reason={sb.reason} />
                </td>
                <td>
                  <Time iso={sb.updated_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function Meter({ label, used, cap, fmt }: { label: string; used: number; cap: number; fmt: (n: number) => string }) {
  const pct = cap > 0 ? Math.min(100, Math.round((used / cap) * 100)) : 0;
  return (
    <div class="meter">
      <div class="meter-label">
        {label}: {fmt(used)} of {cap > 0 ? fmt(cap) : "no limit"} committed
      </div>
      <progress max={100} value={pct} aria-label={`${label} ${pct}%`} />
    </div>
  );
}

export function Overview() {
  const stats = useAsync((s) => get<Stats>("/api/v1/stats", s), []);
  useInterval(stats.reload, 5000);
  if (stats.error) return <ErrorBox error={stats.error} retry={stats.reload} />;
  const st = stats.data;
  if (!st) return <p class="loading">Loading…</p>;
  const counts = Object.entries(st.sandboxes).sort(([a], [b]) => a.localeCompare(b));
  const total = counts.reduce((n, [, c]) => n + c, 0);
  const cpu = (m: number) => `${(m / 1000).toFixed(m % 1000 ? 1 : 0)} cpu`;
  return (
    <section>
      <h1>Overview</h1>
      <div class="cards">
        <a class="card" href="/sandboxes">
          <div class="big">{total}</div>
          <div>sandboxes</div>
          <ul class="counts">
            {counts.map(([s, n]) => (
              <li key={s}>
                {s}: {n}
              </li>
            ))}
          </ul>
        </a>
        <div class="card">
          <div class="big">{st.sessions.active}</div>
          <div>sessions ({st.sessions.busy} busy)</div>
        </div>
      </div>
      <h2>Capacity</h2>
      <Meter label="CPU" used={st.resources.millicpu_committed} cap={st.resources.millicpu_capacity} fmt={cpu} />
      <Meter
        label="Memory"
        used={st.resources.memory_bytes_committed}
        cap={st.resources.memory_bytes_capacity}
        fmt={bytes}
      />
      <h2>Warm pools</h2>
      {st.warm_pools?.length ? (
        <table class="list pools" aria-label="warm pools">
          <thead>
            <tr>
              <th>Pool</th>
              <th>Ready</th>
              <th>Served</th>
              <th>Missed</th>
            </tr>
          </thead>
          <tbody>
            {st.warm_pools.map((p) => (
              <tr key={p.name}>
                <td>{p.name}</td>
                <td>
                  {p.ready} of {p.size}
                </td>
                <td>{p.hits}</td>
                <td>{p.misses}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <Empty>
          No warm pools. Keep sandboxes ready for a language or a template with: agent2env serve --warm-pools
          python=2,mytemplate=1
        </Empty>
      )}
      <Failures />
    </section>
  );
}
