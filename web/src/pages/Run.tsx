// One task run: its state, refreshed until it ends, and its events as they
// happen (the event stream, read with fetch).
import { useEffect, useRef, useState } from "preact/hooks";
import { download, follow, get, type Run as RunT, type RunEvent } from "../api";
import { bytes } from "../format";
import { CopyID, ErrorBox, Reconnecting, Status, Time, useAsync, useInterval } from "../ui";

const ended = (s: string) => s !== "queued" && s !== "running";

export function Run({ id }: { id: string }) {
  const path = `/api/v1/runs/${encodeURIComponent(id)}`;
  const run = useAsync((s) => get<RunT>(path, s), [path]);
  const r = run.data;
  const over = useRef(false);
  over.current = r !== undefined && ended(r.status);
  const events = useEvents(path + "/events", over);
  // Refreshed until it ends; its end event says so at once.
  useInterval(() => !(r && ended(r.status)) && run.reload(), 2000);
  const last = events.items[events.items.length - 1];
  useEffect(() => {
    if (last?.type === "end") run.reload();
  }, [last?.type]);
  if (run.error) return <ErrorBox error={run.error} retry={run.reload} kind="run" />;
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
      <Artifacts r={r} path={path} />
      <h2>Events</h2>
      {events.error !== undefined && <ErrorBox error={events.error} />}
      {events.reconnecting !== undefined && <Reconnecting cut={events.reconnecting} what="the run's events" />}
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

/** The run's artifacts, each downloaded by a click, or all as one tar archive. */
function Artifacts({ r, path }: { r: RunT; path: string }) {
  const [error, setError] = useState<unknown>();
  const save = (from: string, name: string) => {
    setError(undefined);
    download(from, name).catch(setError);
  };
  const items = r.artifacts ?? [];
  return (
    <>
      {items.length > 0 && (
        <>
          <h2>Artifacts</h2>
          <ul class="artifacts">
            {items.map((a) => (
              <li key={a.path}>
                <code>{a.path}</code> ({bytes(a.size)}){" "}
                <button
                  type="button"
                  aria-label={`download ${a.path}`}
                  onClick={() =>
                    save(
                      `${path}/artifacts/${a.path.replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/")}`,
                      a.path.split("/").pop() || "artifact",
                    )
                  }
                >
                  Download
                </button>
              </li>
            ))}
          </ul>
          <button type="button" onClick={() => save(`${path}/artifacts`, `${r.id}-artifacts.tar`)}>
            Download all (tar)
          </button>
        </>
      )}
      {r.artifacts_truncated && <p class="reason">Artifacts: more were left out, over the size limit.</p>}
      {r.artifacts_error && <p class="reason">Artifacts: {r.artifacts_error}</p>}
      {error !== undefined && <ErrorBox error={error} />}
    </>
  );
}

/** One event, as text. */
function Event({ e }: { e: RunEvent }) {
  switch (e.type) {
    case "phase":
      return (
        <span class="ev-what">
          phase {e.phase}
          {e.text ? `: ${e.text}` : ""}
        </span>
      );
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
  // liveness, and any later type: what it says.
  return (
    <span class="ev-what">
      {e.type}
      {e.text ? `: ${e.text}` : ""}
    </span>
  );
}

/**
 * The events of the stream at path, as they arrive, until the end event.
 * A stream cut before it (the daemon restarted, a proxy closed it) is
 * followed again after the last event shown (?after= its seq): the daemon
 * sends only those that came after it. One opened once the run had ended
 * (over) had its whole log: it is not followed again. reconnecting is the
 * error that cut it while it is followed again.
 */
function useEvents(path: string, over: { current: boolean }): { items: RunEvent[]; error?: unknown; reconnecting?: unknown } {
  const [items, setItems] = useState<RunEvent[]>([]);
  const [error, setError] = useState<unknown>();
  const [reconnecting, setReconnecting] = useState<unknown>();
  useEffect(() => {
    const ctl = new AbortController();
    setItems([]);
    setError(undefined);
    const got: RunEvent[] = [];
    let queued = false;
    let overAtOpen = false;
    follow(
      () => {
        overAtOpen = over.current;
        return got.length > 0 ? `${path}?after=${got[got.length - 1].seq}` : path;
      },
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
      {
        done: () => got[got.length - 1]?.type === "end" || overAtOpen,
        onState: (open, cut) => setReconnecting(open ? undefined : (cut ?? "the stream ended before the run did")),
      },
    ).catch((e) => (e as Error).name !== "AbortError" && setError(e));
    return () => ctl.abort();
  }, [path]);
  return { items, error, reconnecting };
}
