// The sandboxes: one page of the list per request, newest first (the next
// pages older ones), filtered by status on the server (and by text on the
// page), and a form that creates one from an image or a template.
import { useState } from "preact/hooks";
import { call, get, type Sandbox, type SandboxList } from "../api";
import { navigate, withParam } from "../router";
import { ErrorBox, Loaded, Status, Time, useAsync, useInterval } from "../ui";

const pageSize = 50;
const statuses = ["", "pending", "running", "paused", "succeeded", "failed", "terminating", "unknown"];

export function Sandboxes({ url }: { url: URL }) {
  const cursor = url.searchParams.get("cursor") ?? "";
  const status = url.searchParams.get("status") ?? "";
  const [text, setText] = useState("");
  const q = new URLSearchParams({ limit: String(pageSize), order: "desc" });
  if (cursor) q.set("cursor", cursor);
  if (status) q.set("status", status);
  const list = useAsync((s) => get<SandboxList>(`/api/v1/sandboxes?${q}`, s), [q.toString()]);
  useInterval(list.reload, 5000);
  const find = text.trim().toLowerCase();
  const items = (list.data?.items ?? []).filter(
    (sb) => !find || [sb.id, sb.image, sb.template ?? "", sb.reason ?? ""].some((f) => f.toLowerCase().includes(find)),
  );
  return (
    <section>
      <h1>Sandboxes</h1>
      <CreateForm
        template={url.searchParams.get("template") ?? ""}
        onCreated={(sb) => navigate(`/sandboxes/${encodeURIComponent(sb.id)}`)}
      />
      <div class="filters">
        <label>
          Status{" "}
          <select value={status} onChange={(e) => navigate(withParam(url, "status", e.currentTarget.value))}>
            {statuses.map((s) => (
              <option key={s} value={s}>
                {s || "any"}
              </option>
            ))}
          </select>
        </label>
        <label>
          Find{" "}
          <input
            type="search"
            value={text}
            placeholder="on this page: id, image, reason"
            onInput={(e) => setText(e.currentTarget.value)}
          />
        </label>
      </div>
      <Loaded
        state={list}
        empty={(d) =>
          items.length === 0 && (
            <>
              {d.items.length > 0
                ? "No sandbox on this page matches the text."
                : status
                  ? `No sandbox is ${status}.`
                  : "No sandboxes yet. Create one above, or with: agent2env sandbox create --image IMAGE"}
            </>
          )
        }
      >
        {() => (
          <table class="list">
            <thead>
              <tr>
                <th>ID</th>
                <th>Status</th>
                <th>Image or template</th>
                <th>Resources</th>
                <th>Created</th>
                <th>Expires</th>
              </tr>
            </thead>
            <tbody>
              {items.map((sb) => (
                <tr key={sb.id}>
                  <td>
                    <a href={`/sandboxes/${encodeURIComponent(sb.id)}`}>
                      <code>{sb.id}</code>
                    </a>
                  </td>
                  <td>
                    <Status status={sb.state} reason={sb.reason} />
                  </td>
                  <td>{sb.template ? `${sb.template} v${sb.templateVersion ?? ""}` : sb.image}</td>
                  <td>
                    {sb.cpu} cpu, {sb.memory}
                  </td>
                  <td>
                    <Time iso={sb.created_at} />
                  </td>
                  <td>
                    <Time iso={sb.expires_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
      <nav class="pager" aria-label="pages">
        {cursor && <a href={withParam(url, "cursor", "")}>Newest</a>}
        {list.data?.nextCursor && <a href={withParam(url, "cursor", list.data.nextCursor)}>Older</a>}
      </nav>
    </section>
  );
}

/** The form; template names one to start from (the template page's link). */
function CreateForm({ template, onCreated }: { template: string; onCreated: (sb: Sandbox) => void }) {
  const [from, setFrom] = useState<"image" | "template">(template ? "template" : "image");
  const [name, setName] = useState(template);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  return (
    <form
      class="create"
      aria-label="create a sandbox"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(undefined);
        try {
          onCreated(await call<Sandbox>("POST", "/api/v1/sandboxes", { [from]: name.trim() }));
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <select
        aria-label="create from"
        value={from}
        onChange={(e) => setFrom(e.currentTarget.value as "image" | "template")}
      >
        <option value="image">Image</option>
        <option value="template">Template</option>
      </select>
      <input
        name="source"
        aria-label={from}
        placeholder={from === "image" ? "e.g. agent2env/code-interpreter" : "template name"}
        value={name}
        onInput={(e) => setName(e.currentTarget.value)}
      />
      <button type="submit" disabled={busy || !name.trim()}>
        {busy ? "Creating…" : "Create sandbox"}
      </button>
      {error !== undefined && <ErrorBox error={error} />}
    </form>
  );
}
