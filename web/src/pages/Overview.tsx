// Counts and capacity from the stats endpoint.
import { get, type Stats } from "../api";
import { bytes } from "../format";
import { ErrorBox, useAsync, useInterval } from "../ui";

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
    </section>
  );
}
