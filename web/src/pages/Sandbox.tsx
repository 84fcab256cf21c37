// One sandbox: what it is, its actions (pause, resume and snapshots among
// them), its snapshots, its logs (refreshed while shown), a one-off
// command, and a terminal (loaded when opened).
import type { FunctionComponent } from "preact";
import { useEffect, useState } from "preact/hooks";
import { call, get, type Capabilities, type ExecResponse, type Logs, type Sandbox as SandboxT } from "../api";
import { navigate } from "../router";
import { Files } from "./Files";
import { SnapshotList } from "./Snapshots";
import { CopyID, ErrorBox, Status, Time, useAsync, useInterval } from "../ui";

type TerminalProps = { sandbox: string; onClose: () => void };

/** The terminal, whose code (xterm.js) is fetched the first time one opens. */
function LazyTerminal(props: TerminalProps) {
  const [T, setT] = useState<FunctionComponent<TerminalProps>>();
  const [error, setError] = useState<unknown>();
  useEffect(() => {
    import("../terminal").then(
      (m) => setT(() => m.Terminal),
      // Its file is named by its content: a daemon updated since this
      // page was loaded serves another.
      (e) =>
        setError(
          new Error(
            `The terminal's code could not be loaded (${(e as Error).message}). The console may have been updated since this page was opened: reload the page.`,
          ),
        ),
    );
  }, []);
  if (error !== undefined) return <ErrorBox error={error} retry={() => location.reload()} />;
  return T ? <T {...props} /> : <p class="loading">Loading the terminal…</p>;
}

export function Sandbox({ id }: { id: string }) {
  const path = `/api/v1/sandboxes/${encodeURIComponent(id)}`;
  const sb = useAsync((s) => get<SandboxT>(path, s), [path]);
  const logs = useAsync((s) => get<Logs>(path + "/logs", s), [path]);
  const caps = useAsync((s) => get<Capabilities>("/api/v1/capabilities", s), []).data;
  const [actionError, setActionError] = useState<unknown>();
  const [term, setTerm] = useState(false);
  const [snapshots, setSnapshots] = useState(0);
  const [saving, setSaving] = useState(false);
  // From an action until the sandbox is read again, its buttons are off:
  // the page still shows the state before the action, whose buttons may
  // no longer apply (Pause just after Restart, while it starts again).
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (!sb.loading) setBusy(false);
  }, [sb.loading]);
  useInterval(sb.reload, 3000);
  useInterval(logs.reload, 3000);
  // A read that failed after one that did not (the daemon restarting, a
  // sandbox deleted) is said above the page as last read: its terminal
  // stays.
  if (sb.error && !sb.data) return <ErrorBox error={sb.error} retry={sb.reload} />;
  const s = sb.data;
  if (!s) return <p class="loading">Loading…</p>;
  const act = async (verb: string) => {
    // Asked before the buttons go off: cancelled, nothing changes.
    if (verb === "delete" && !confirm(`Delete sandbox ${id}?`)) return;
    setActionError(undefined);
    setBusy(true);
    try {
      if (verb === "delete") {
        await call("DELETE", path);
        navigate("/sandboxes");
        return;
      }
      if (verb === "snapshot" || verb === "snapshot-stop") {
        setSaving(true);
        await call("POST", `${path}/snapshots`, { stop: verb === "snapshot-stop" });
        setSnapshots((n) => n + 1);
      } else {
        await call("POST", `${path}/${verb}`);
      }
      sb.reload();
    } catch (e) {
      setActionError(e);
      setBusy(false);
    } finally {
      setSaving(false);
    }
  };
  return (
    <section>
      <h1>
        Sandbox <CopyID id={s.id} />
      </h1>
      {sb.error !== undefined && <ErrorBox error={sb.error} retry={sb.reload} />}
      <dl class="info">
        <dt>Status</dt>
        <dd>
          <Status status={s.state} /> {s.reason && <span class="reason">{s.reason}</span>}
        </dd>
        <dt>{s.template ? "Template" : "Image"}</dt>
        <dd>{s.template ? `${s.template} v${s.templateVersion ?? ""} (${s.image})` : s.image}</dd>
        <dt>Resources</dt>
        <dd>
          {s.cpu} cpu, {s.memory}
        </dd>
        <dt>Created</dt>
        <dd>
          <Time iso={s.created_at} />
        </dd>
        <dt>Expires</dt>
        <dd>
          <Time iso={s.expires_at} />
        </dd>
      </dl>
      <fieldset class="actions" disabled={busy}>
        {s.state === "paused" ? (
          <button type="button" onClick={() => act("resume")}>
            Resume
          </button>
        ) : (
          s.state !== "running" &&
          s.state !== "pending" && (
            <button type="button" onClick={() => act("start")}>
              Start
            </button>
          )
        )}
        {s.state === "running" && caps?.pause && (
          <button type="button" onClick={() => act("pause")}>
            Pause
          </button>
        )}
        {(s.state === "running" || s.state === "paused") && (
          <button type="button" onClick={() => act("stop")}>
            Stop
          </button>
        )}
        {s.state === "running" && (
          <button type="button" onClick={() => act("restart")}>
            Restart
          </button>
        )}
        {(s.state === "running" || s.state === "paused") && caps?.snapshots && (
          <>
            <button type="button" disabled={saving} onClick={() => act("snapshot")}>
              {saving ? "Saving…" : "Snapshot"}
            </button>
            <button
              type="button"
              disabled={saving}
              title="Save it, then stop it: its memory is freed, its files kept"
              onClick={() => act("snapshot-stop")}
            >
              Snapshot to disk
            </button>
          </>
        )}
        <button type="button" class="danger" onClick={() => act("delete")}>
          Delete
        </button>
        <a href={`/sandboxes/${encodeURIComponent(id)}/conversations`}>Conversations</a>
      </fieldset>
      {actionError !== undefined && <ErrorBox error={actionError} />}
      {caps && (!caps.pause || !caps.snapshots) && (
        <p class="hint">
          The daemon's runtime ({caps.runtime}) cannot {!caps.pause && "pause sandboxes"}
          {!caps.pause && !caps.snapshots && " nor "}
          {!caps.snapshots && "take snapshots (serve --criu: make criu builds one)"}.
        </p>
      )}
      <h2>Snapshots</h2>
      <SnapshotList sandbox={id} version={snapshots} />
      <h2>Terminal</h2>
      {term && (s.state === "running" || s.state === "paused") ? (
        // Kept while paused: its shell is paused with the rest, and goes on
        // when resumed (closing it would end the shell).
        <>
          {s.state === "paused" && <p class="hint">Paused: the terminal goes on when the sandbox is resumed.</p>}
          <LazyTerminal sandbox={id} onClose={() => setTerm(false)} />
        </>
      ) : s.state !== "running" ? (
        <p class="hint">The terminal opens on a running sandbox.</p>
      ) : (
        <button type="button" onClick={() => setTerm(true)}>
          Open terminal
        </button>
      )}
      <h2>Run a command</h2>
      <Exec path={path} disabled={s.state !== "running"} />
      <h2>Files</h2>
      <Files path={path} disabled={s.state !== "running"} />
      <h2>Logs</h2>
      {logs.error ? (
        <ErrorBox error={logs.error} retry={logs.reload} />
      ) : (
        <>
          <pre class="logs" tabIndex={0} aria-label="console output">
            {logs.data?.logs || "(no console output)"}
          </pre>
          {logs.data?.events_dropped ? (
            <p class="hint">{logs.data.events_dropped} older events dropped: a sandbox keeps its newest 1000.</p>
          ) : null}
          <ul class="events">
            {(logs.data?.events ?? []).map((e, i) => (
              <li key={i}>{e}</li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function Exec({ path, disabled }: { path: string; disabled: boolean }) {
  const [cmd, setCmd] = useState("");
  const [busy, setBusy] = useState(false);
  const [out, setOut] = useState<ExecResponse>();
  const [error, setError] = useState<unknown>();
  return (
    <form
      class="exec"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(undefined);
        try {
          setOut(await call<ExecResponse>("POST", path + "/exec", { command: ["sh", "-c", cmd] }));
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <input
        aria-label="command"
        placeholder="a shell command, e.g. ls -la /"
        value={cmd}
        disabled={disabled}
        onInput={(e) => setCmd(e.currentTarget.value)}
      />
      <button type="submit" disabled={disabled || busy || !cmd.trim()}>
        {busy ? "Running…" : "Run"}
      </button>
      {error !== undefined && <ErrorBox error={error} />}
      {out && (
        <div class="exec-result">
          <div>
            exit {out.exit_code} in {Math.round(out.duration_ms)} ms{out.timed_out ? ", timed out" : ""}
            {out.truncated ? ", output truncated" : ""}
            {out.reason ? ` (${out.reason})` : ""}
          </div>
          <pre class="stdout" aria-label="stdout">
            {out.stdout}
          </pre>
          {out.stderr && (
            <pre class="stderr" aria-label="stderr">
              {out.stderr}
            </pre>
          )}
        </div>
      )}
    </form>
  );
}
