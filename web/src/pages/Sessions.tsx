// Sessions and contexts: the code-interpreter sessions and the execution
// contexts (each list one request), a session's page with its contexts,
// and deleting either.
import { useState } from "preact/hooks";
import { call, get, type Context, type Session } from "../api";
import { navigate } from "../router";
import { CopyID, Empty, ErrorBox, Loaded, Status, Time, useAsync, useInterval, type Async } from "../ui";

export function Sessions() {
  const sessions = useAsync((s) => get<{ items: Session[] }>("/api/v1/sessions", s), []);
  const contexts = useAsync((s) => get<{ items: Context[] }>("/api/v1/contexts", s), []);
  useInterval(sessions.reload, 5000);
  return (
    <section>
      <h1>Sessions</h1>
      <Loaded
        state={sessions}
        empty={(d) =>
          d.items.length === 0 && (
            <>No sessions. A session starts with the first code run through POST /api/v1/sessions/execute, or an SDK.</>
          )
        }
      >
        {(d) => (
          <table class="list sessions">
            <thead>
              <tr>
                <th>Session</th>
                <th>Flavor</th>
                <th>Executions</th>
                <th>Sandbox</th>
                <th>Last used</th>
                <th>Ends</th>
              </tr>
            </thead>
            <tbody>
              {d.items.map((x) => (
                <tr key={x.session_id}>
                  <td>
                    <a href={`/sessions/${encodeURIComponent(x.session_id)}`}>
                      <code>{x.session_id}</code>
                    </a>
                    {x.busy > 0 && <div class="reason">busy</div>}
                  </td>
                  <td>
                    {x.flavor} <span class="reason">{x.languages.join(", ")}</span>
                  </td>
                  <td>
                    {x.execution_count}
                    {x.error_count > 0 && <span class="reason"> ({x.error_count} failed)</span>}
                  </td>
                  <td>
                    <a href={`/sandboxes/${encodeURIComponent(x.sandbox_id)}`}>
                      <code>{x.sandbox_id}</code>
                    </a>
                  </td>
                  <td>
                    <Time iso={x.last_used_at} />
                  </td>
                  <td>
                    <Time iso={x.expires_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
      <h2>Contexts</h2>
      <ContextTable list={contexts} />
    </section>
  );
}

function ContextTable({ list }: { list: Async<{ items: Context[] }> }) {
  const [error, setError] = useState<unknown>();
  if (list.error) return <ErrorBox error={list.error} retry={list.reload} />;
  if (!list.data) return <p class="loading">Loading…</p>;
  if (list.data.items.length === 0)
    return (
      <Empty>No execution contexts. Create one with POST /api/v1/contexts, or an SDK's create_code_context.</Empty>
    );
  const remove = async (c: Context) => {
    if (!confirm(`Delete context ${c.context_id}?`)) return;
    setError(undefined);
    try {
      await call(
        "DELETE",
        `/api/v1/sandboxes/${encodeURIComponent(c.sandbox_id)}/contexts/${encodeURIComponent(c.context_id)}`,
      );
      list.reload();
    } catch (e) {
      setError(e);
    }
  };
  return (
    <>
      {error !== undefined && <ErrorBox error={error} />}
      <table class="list contexts">
        <thead>
          <tr>
            <th>Context</th>
            <th>Status</th>
            <th>Language</th>
            <th>Executions</th>
            <th>Last used</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data.items.map((c) => (
            <tr key={c.context_id}>
              <td>
                <code>{c.context_id}</code>
                {c.name && <div class="reason">{c.name}</div>}
                {c.session_name && <div class="reason">session {c.session_name}</div>}
              </td>
              <td>
                <Status status={c.status} />
              </td>
              <td>
                {c.language} <span class="reason">{c.working_dir}</span>
              </td>
              <td>{c.execution_count}</td>
              <td>
                <Time iso={c.last_used_at} />
              </td>
              <td>
                <button type="button" aria-label={`delete context ${c.context_id}`} onClick={() => remove(c)}>
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

export function SessionPage({ id }: { id: string }) {
  const path = `/api/v1/sessions/${encodeURIComponent(id)}`;
  const sess = useAsync((s) => get<Session>(path, s), [path]);
  const sandbox = sess.data?.sandbox_id ?? "";
  const contexts = useAsync(
    (s) =>
      sandbox
        ? get<{ items: Context[] }>(`/api/v1/sandboxes/${encodeURIComponent(sandbox)}/contexts`, s)
        : new Promise<{ items: Context[] }>(() => {}),
    [sandbox],
  );
  const [error, setError] = useState<unknown>();
  useInterval(sess.reload, 5000);
  if (sess.error) return <ErrorBox error={sess.error} retry={sess.reload} />;
  const x = sess.data;
  if (!x) return <p class="loading">Loading…</p>;
  return (
    <section>
      <h1>
        Session <CopyID id={x.session_id} />
      </h1>
      <dl class="info">
        <dt>Flavor</dt>
        <dd>
          {x.flavor} ({x.languages.join(", ")}), {x.cpu} cpu, {x.memory}
        </dd>
        <dt>Sandbox</dt>
        <dd>
          <a href={`/sandboxes/${encodeURIComponent(x.sandbox_id)}`}>
            <code>{x.sandbox_id}</code>
          </a>
        </dd>
        <dt>Executions</dt>
        <dd>
          {x.execution_count}, {x.error_count} failed{x.busy > 0 ? `, ${x.busy} running now` : ""}
        </dd>
        <dt>Created</dt>
        <dd>
          <Time iso={x.created_at} />
        </dd>
        <dt>Last used</dt>
        <dd>
          <Time iso={x.last_used_at} />
        </dd>
        <dt>Ends</dt>
        <dd>
          <Time iso={x.expires_at} /> (idle {x.idle_timeout} s)
        </dd>
        {(x.made_by_run || x.made_by_sandbox) && (
          <>
            <dt>Made by</dt>
            <dd>
              {x.made_by_run ? (
                <a href={`/runs/${encodeURIComponent(x.made_by_run)}`}>run {x.made_by_run}</a>
              ) : (
                <a href={`/sandboxes/${encodeURIComponent(x.made_by_sandbox!)}`}>sandbox {x.made_by_sandbox}</a>
              )}
            </dd>
          </>
        )}
      </dl>
      <div class="actions">
        <button
          type="button"
          class="danger"
          onClick={async () => {
            if (!confirm(`Stop session ${id}? Its sandbox is deleted.`)) return;
            try {
              await call("DELETE", path);
              navigate("/sessions");
            } catch (e) {
              setError(e);
            }
          }}
        >
          Stop session
        </button>
      </div>
      {error !== undefined && <ErrorBox error={error} />}
      <h2>Its contexts</h2>
      <ContextTable list={contexts} />
    </section>
  );
}
