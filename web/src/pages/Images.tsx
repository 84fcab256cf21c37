// Images and prepulls: the images the daemon has (and those being pulled
// or built), the prepull tasks with their progress, refreshed while one is
// active, and a form that starts one.
import { useState } from "preact/hooks";
import { call, get, type Image, type PrepullTask } from "../api";
import { bytes } from "../format";
import { ErrorBox, Loaded, Status, Time, useAsync, useInterval } from "../ui";

const active = (st?: string) => st === "pending" || st === "pulling" || st === "building";

export function Images() {
  const images = useAsync((s) => get<{ items: Image[] }>("/api/v1/images", s), []);
  const tasks = useAsync((s) => get<{ items: PrepullTask[] }>("/api/v1/images/prepull", s), []);
  const busy = tasks.data?.items.some((t) => active(t.status)) || images.data?.items.some((i) => active(i.status));
  useInterval(
    () => {
      tasks.reload();
      images.reload();
    },
    busy ? 1000 : 5000,
  );
  return (
    <section>
      <h1>Images</h1>
      <Prepull
        onStarted={() => {
          tasks.reload();
          images.reload();
        }}
      />
      <h2>Prepull tasks</h2>
      <Loaded
        state={tasks}
        empty={(d) =>
          d.items.length === 0 && (
            <>No prepull tasks. Start one above to have an image ready before sandboxes need it.</>
          )
        }
      >
        {(d) => (
          <table class="list prepulls">
            <thead>
              <tr>
                <th>Image</th>
                <th>Status</th>
                <th>Progress</th>
                <th>Started</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {d.items.map((t) => (
                <PrepullRow key={t.id} t={t} onDeleted={tasks.reload} />
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
      <h2>Stored images</h2>
      <Loaded
        state={images}
        empty={(d) =>
          d.items.length === 0 && <>No images yet. Prepull one above, or create a sandbox: its image is pulled then.</>
        }
      >
        {(d) => (
          <table class="list images">
            <thead>
              <tr>
                <th>Image</th>
                <th>Status</th>
                <th>Size</th>
                <th>Layers</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody>
              {d.items.map((i) => (
                <tr key={i.ref}>
                  <td>
                    <code>{i.ref}</code>
                    {i.digest && <div class="reason">{i.digest.slice(0, 19)}</div>}
                  </td>
                  <td>
                    <Status status={i.status || "ready"} />
                    {i.progress && active(i.status) && (
                      <div class="reason">
                        {i.progress.phase} {i.progress.item}
                        {i.progress.total
                          ? ` ${Math.round(((i.progress.current ?? 0) / i.progress.total) * 100)}%`
                          : ""}
                      </div>
                    )}
                    {i.error && <div class="reason">{i.error}</div>}
                  </td>
                  <td>{i.size ? bytes(i.size) : ""}</td>
                  <td>{i.layers || ""}</td>
                  <td>{i.digest && <Time iso={i.created} />}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
    </section>
  );
}

function PrepullRow({ t, onDeleted }: { t: PrepullTask; onDeleted: () => void }) {
  const [error, setError] = useState<unknown>();
  const pct = t.progress.total > 0 ? Math.round((t.progress.ready / t.progress.total) * 100) : 0;
  return (
    <tr>
      <td>
        <code>{t.image}</code>
        {t.template && <div class="reason">for template {t.template}</div>}
      </td>
      <td>
        <Status status={t.status} />
        {t.error && <div class="reason">{t.error}</div>}
      </td>
      <td>
        <progress max={100} value={pct} aria-label={`${t.image} ${pct}%`} /> {t.progress.ready}/{t.progress.total}
      </td>
      <td>
        <Time iso={t.startedAt} />
      </td>
      <td>
        <button
          type="button"
          aria-label={`remove the prepull of ${t.image}`}
          onClick={() => call("DELETE", `/api/v1/images/prepull/${encodeURIComponent(t.id)}`).then(onDeleted, setError)}
        >
          Remove
        </button>
        {error !== undefined && <ErrorBox error={error} />}
      </td>
    </tr>
  );
}

function Prepull({ onStarted }: { onStarted: () => void }) {
  const [ref, setRef] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  return (
    <form
      class="create"
      aria-label="prepull an image"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(undefined);
        try {
          await call("POST", "/api/v1/images/prepull", { image: ref.trim() });
          setRef("");
          onStarted();
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <input
        aria-label="image to prepull"
        placeholder="e.g. agent2env/python or docker.io/library/alpine:3"
        value={ref}
        onInput={(e) => setRef(e.currentTarget.value)}
      />
      <button type="submit" disabled={busy || !ref.trim()}>
        {busy ? "Starting…" : "Prepull"}
      </button>
      {error !== undefined && <ErrorBox error={error} />}
    </form>
  );
}
