// Snapshots: sandboxes saved with their memory. The page lists them all;
// a sandbox's page lists its own (SnapshotList with sandbox). Each makes a
// new sandbox, running where the save was, or is deleted.
import { useState } from "preact/hooks";
import { call, get, type Sandbox, type Snapshot } from "../api";
import { bytes } from "../format";
import { navigate } from "../router";
import { CopyID, ErrorBox, Loaded, Time, useAsync } from "../ui";

export function Snapshots() {
  return (
    <section>
      <h1>Snapshots</h1>
      <p class="hint">
        A snapshot holds a sandbox's processes with their memory, its files and its spec. Take one from a sandbox's
        page; each new sandbox made from it runs on from where it was saved.
      </p>
      <SnapshotList />
    </section>
  );
}

/** The snapshots, newest first: of sandbox only when given. version changes reload them. */
export function SnapshotList({ sandbox, version = 0 }: { sandbox?: string; version?: number }) {
  const path = "/api/v1/snapshots" + (sandbox ? `?sandbox_id=${encodeURIComponent(sandbox)}` : "");
  const list = useAsync((s) => get<{ items: Snapshot[] }>(path, s), [path, version]);
  return (
    <Loaded
      state={list}
      empty={(d) =>
        d.items.length === 0 &&
        (sandbox ? <>No snapshots of this sandbox.</> : <>No snapshots yet. Take one from a sandbox's page.</>)
      }
    >
      {(d) => (
        <table class="list snapshots" aria-label="snapshots">
          <thead>
            <tr>
              <th>Snapshot</th>
              {!sandbox && <th>Sandbox</th>}
              <th>Image</th>
              <th>Size</th>
              <th>Taken</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {d.items.map((s) => (
              <SnapshotRow key={s.id} s={s} showSandbox={!sandbox} onDeleted={list.reload} />
            ))}
          </tbody>
        </table>
      )}
    </Loaded>
  );
}

function SnapshotRow({ s, showSandbox, onDeleted }: { s: Snapshot; showSandbox: boolean; onDeleted: () => void }) {
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const act = async (f: () => Promise<void>) => {
    setError(undefined);
    setBusy(true);
    try {
      await f();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const restore = () =>
    act(async () => {
      const sb = await call<Sandbox>("POST", "/api/v1/sandboxes", { from_snapshot: s.id });
      navigate(`/sandboxes/${encodeURIComponent(sb.id)}`);
    });
  const remove = () =>
    act(async () => {
      if (!confirm(`Delete snapshot ${s.id}? Sandboxes made from it stay.`)) return;
      await call("DELETE", `/api/v1/snapshots/${encodeURIComponent(s.id)}`);
      onDeleted();
    });
  return (
    <tr>
      <td>
        <CopyID id={s.id} />
        {s.stopped && <div class="reason">its sandbox was stopped once saved</div>}
      </td>
      {showSandbox && (
        <td>
          <a href={`/sandboxes/${encodeURIComponent(s.sandbox_id)}`}>{s.sandbox_id}</a>
        </td>
      )}
      <td>
        <code>{s.image}</code>
        <div class="reason">
          {s.cpu} cpu, {s.memory}
        </div>
      </td>
      <td>{bytes(s.size_bytes)}</td>
      <td>
        <Time iso={s.created_at} />
      </td>
      <td>
        <div class="actions">
          <button type="button" disabled={busy} onClick={restore} aria-label={`new sandbox from ${s.id}`}>
            New sandbox
          </button>
          <button type="button" class="danger" disabled={busy} onClick={remove} aria-label={`delete ${s.id}`}>
            Delete
          </button>
        </div>
        {error !== undefined && <ErrorBox error={error} kind="snapshot" />}
      </td>
    </tr>
  );
}
