// One task run: its state, refreshed until it ends, and its events as they
// happen (the event stream, read with fetch).
import { useEffect, useState } from "preact/hooks";
import { get, stream, type Run as RunT, type RunEvent } from "../api";
import { bytes } from "../format";
import { CopyID, ErrorBox, Status, Time, useAsync, useInterval } from "../ui";

const ended = (s: string) => s !== "queued" && s !== "running";

export function Run({ id }: { id: string }) {
  const path = `/api/v1/runs/${encodeURIComponent(id)}`;
  const run = useAsync((s) => get<RunT>(path, s), [path]);
  const events = useEvents(path + "/events");
  const r = run.data;
  // Refreshed until it ends; its end event says so at once.
  useInterval(() => !(r && ended(r.status)) && run.reload(), 2000);
  const last = events.items[events.items.length - 1];
  useEffect(() => {
    if (last?.type === "end") run.reload();
  }, [last?.type]);
  if (run.error) return <ErrorBox error={run.error} retry={run.reload} />;
  if (!r) return <p class="loading">Loading…</p>;
  return (
    <section>
      <h1>
        Run <CopyID id={r.id} />
      </h1>
      <dl class="info">
        <dt>Status</dt>
        <dd>
          <Status status={r.status} /> <span class="reason">{r.reason ?? r.phase}</span>
        </dd>
        <dt>Task</dt>
        <dd>
          {r.task} (repeat {r.repeat}, <a href={`/runs?batch=${encodeURIComponent(r.batch_id)}`}>its submission</a>)
        </dd>
        <dt>Agent × model</dt>
        <dd>
          {r.agent}
          {r.model ? ` × ${r.model}` : ""}
        </dd>
        {r.exit_code !== undefined && (
          <>
            <dt>Exit code</dt>
            <dd>{r.exit_code}</dd>
          </>
        )}
        <dt>Created</dt>
        <dd>
          <Time iso={r.created_at} />
        </dd>
        {r.ended_at && (
          <>
            <dt>Ended</dt>
            <dd>
              <Time iso={r.ended_at} />
            </dd>
          </>
        )}
        <dt>Model calls</dt>
        <dd>
          {r.llm.requests} ({r.llm.input_tokens} tokens in, {r.llm.output_tokens} out
          {r.llm.source ? `, counted by the ${r.llm.source}` : ""})
        </dd>
        {r.sandbox_id && (
          <>
            <dt>Sandbox</dt>
            <dd>
              <a href={`/sandboxes/${encodeURIComponent(r.sandbox_id)}`}>
                <code>{r.sandbox_id}</code>
              </a>{" "}
              {r.llm.requests > 0 && (
                <a href={`/sandboxes/${encodeURIComponent(r.sandbox_id)}/conversations`}>its conversations</a>
              )}
            </dd>
          </>
        )}
      </dl>
      {r.artifacts && r.artifacts.length > 0 && (
        <>
          <h2>Artifacts</h2>
          <ul>
            {r.artifacts.map((a) => (
              <li key={a.path}>
                <code>{a.path}</code> ({bytes(a.size)})
              </li>
            ))}
          </ul>
        </>
      )}
      {r.artifacts_error && <p class="reason">Artifacts: {r.artifacts_error}</p>}
      <h2>Events</h2>
      {events.error !== undefined && <ErrorBox error={events.error} />}
      {events.items.length === 0 ? (
        <p class="hint">{ended(r.status) ? "No events." : "Waiting for the run's first event…"}</p>
      ) : (
        <ol class="run-events" aria-label="events">
          {events.items.map((e) => (
            <li key={e.seq} class={`ev ev-${e.type}`}>
              <time dateTime={e.time} title={e.time}>
                {e.time.slice(11, 19)}
              </time>
              <Event e={e} />
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

/** One event, as text. */
function Event({ e }: { e: RunEvent }) {
  switch (e.type) {
    case "phase":
      return <span class="ev-what">phase {e.phase}</span>;
    case "output":
      return <pre class={`ev-text ${e.stream === "stderr" ? "stderr" : ""}`}>{e.text}</pre>;
    case "agent":
      return (
        <span class="ev-agent">
          <span class="ev-what">
            {e.kind}
            {e.tool ? ` ${e.tool}` : ""}
            {e.is_error ? " (error)" : ""}
          </span>
          {e.text && <pre class="ev-text">{e.text}</pre>}
          {e.input !== undefined && <pre class="ev-text">{JSON.stringify(e.input, null, 2)}</pre>}
        </span>
      );
    case "end":
      return (
        <span class="ev-what">
          ended {e.status}
          {e.reason ? `: ${e.reason}` : ""}
        </span>
      );
  }
  return <span class="ev-what">{e.type}</span>;
}

/** The events of the stream at path, as they arrive. */
function useEvents(path: string): { items: RunEvent[]; error?: unknown } {
  const [items, setItems] = useState<RunEvent[]>([]);
  const [error, setError] = useState<unknown>();
  useEffect(() => {
    const ctl = new AbortController();
    setItems([]);
    const got: RunEvent[] = [];
    let queued = false;
    stream(
      path,
      ({ event, data }) => {
        if (event !== "event") return;
        got.push(data as RunEvent);
        // One render per frame, however fast the events come.
        if (!queued) {
          queued = true;
          requestAnimationFrame(() => {
            queued = false;
            setItems(got.slice());
          });
        }
      },
      ctl.signal,
    ).catch((e) => (e as Error).name !== "AbortError" && setError(e));
    return () => ctl.abort();
  }, [path]);
  return { items, error };
}
