// Templates: the list (one page per request), a template's versions and
// its YAML as exported, rollback to a version, and import from YAML.
import { useState } from "preact/hooks";
import {
  call,
  get,
  getText,
  postForm,
  type ImportResult,
  type Template,
  type TemplateList,
  type TemplateVersion,
} from "../api";
import { lineDiff } from "../diff";
import { navigate } from "../router";
import { CopyID, ErrorBox, Loaded, Time, useAsync } from "../ui";

const pageSize = 50;

export function Templates({ url }: { url: URL }) {
  const page = Math.max(1, Number(url.searchParams.get("page")) || 1);
  const list = useAsync((s) => get<TemplateList>(`/api/v1/templates?page=${page}&pageSize=${pageSize}`, s), [page]);
  return (
    <section>
      <h1>Templates</h1>
      <Import onDone={list.reload} />
      <Loaded
        state={list}
        empty={(d) =>
          d.items.length === 0 && <>No templates yet. Import one above, or with: agent2env template import FILE.yaml</>
        }
      >
        {(d) => (
          <table class="list">
            <thead>
              <tr>
                <th>Name</th>
                <th>Latest</th>
                <th>Image</th>
                <th>Resources</th>
                <th>Updated</th>
              </tr>
            </thead>
            <tbody>
              {d.items.map((t) => (
                <tr key={t.id}>
                  <td>
                    <a href={`/templates/${encodeURIComponent(t.name)}`}>{t.name}</a>
                    {t.description && <div class="reason">{t.description}</div>}
                  </td>
                  <td>v{t.latestVersion}</td>
                  <td>{t.spec?.image}</td>
                  <td>{t.spec && `${t.spec.resources.cpu} cpu, ${t.spec.resources.memory}`}</td>
                  <td>
                    <Time iso={t.updatedAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
      <nav class="pager" aria-label="pages">
        {page > 1 && <a href={`/templates?page=${page - 1}`}>Previous page</a>}
        {list.data && page * pageSize < list.data.total && <a href={`/templates?page=${page + 1}`}>Next page</a>}
      </nav>
    </section>
  );
}

/** Creates or updates templates from a YAML document, pasted or a file. */
function Import({ onDone }: { onDone: () => void }) {
  const [yaml, setYAML] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [result, setResult] = useState<ImportResult>();
  return (
    <details class="import">
      <summary>Import from YAML</summary>
      <form
        aria-label="import templates"
        onSubmit={async (e) => {
          e.preventDefault();
          setBusy(true);
          setError(undefined);
          setResult(undefined);
          const form = new FormData();
          form.set("file", new Blob([yaml], { type: "application/yaml" }), "templates.yaml");
          try {
            setResult(await postForm<ImportResult>("/api/v1/templates/import", form));
            onDone();
          } catch (err) {
            setError(err);
          } finally {
            setBusy(false);
          }
        }}
      >
        <textarea
          aria-label="template YAML"
          rows={10}
          spellcheck={false}
          placeholder={
            "apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata:\n  name: python\nspec:\n  image: agent2env/python"
          }
          value={yaml}
          onInput={(e) => setYAML(e.currentTarget.value)}
        />
        <div class="actions">
          <input
            type="file"
            aria-label="YAML file"
            accept=".yaml,.yml,application/yaml,text/yaml"
            onChange={async (e) => {
              const f = e.currentTarget.files?.[0];
              if (f) setYAML(await f.text());
            }}
          />
          <button type="submit" disabled={busy || !yaml.trim()}>
            {busy ? "Importing…" : "Import"}
          </button>
        </div>
      </form>
      {error !== undefined && <ErrorBox error={error} />}
      {result && (
        <ul class="import-result" role="status">
          {result.results.map((r) => (
            <li key={r.name}>
              <a href={`/templates/${encodeURIComponent(r.name)}`}>{r.name}</a>: {r.action}
              {r.version ? ` (v${r.version})` : ""}
              {r.error && <span class="stderr"> {r.error}</span>}
            </li>
          ))}
        </ul>
      )}
    </details>
  );
}

export function TemplatePage({ name }: { name: string }) {
  const path = `/api/v1/templates/${encodeURIComponent(name)}`;
  const t = useAsync((s) => get<Template>(path, s), [path]);
  const versions = useAsync((s) => get<{ items: TemplateVersion[] }>(path + "/versions", s), [path]);
  const [shown, setShown] = useState(0); // 0: the latest
  const yaml = useAsync((s) => getText(`${path}/export${shown ? `?version=${shown}` : ""}`, s), [path, shown]);
  // Diffed against the latest: the shown version's YAML and the latest's.
  const [diff, setDiff] = useState(false);
  const latest = useAsync((s) => (diff ? getText(`${path}/export`, s) : Promise.resolve("")), [path, diff]);
  const [actionError, setActionError] = useState<unknown>();
  if (t.error) return <ErrorBox error={t.error} retry={t.reload} />;
  if (!t.data) return <p class="loading">Loading…</p>;
  const tpl = t.data;
  const rollback = async (v: number) => {
    if (!confirm(`Make version ${v} of ${name} its latest?`)) return;
    setActionError(undefined);
    try {
      await call("POST", path + "/rollback", { targetVersion: v, changelog: `rolled back to v${v} from the console` });
      t.reload();
      versions.reload();
      // The latest's YAML, read anew: shown may have been the latest already.
      setShown(0);
      setDiff(false);
      yaml.reload();
    } catch (e) {
      setActionError(e);
    }
  };
  const remove = async () => {
    if (!confirm(`Delete template ${name} and its versions?`)) return;
    try {
      await call("DELETE", path);
      navigate("/templates");
    } catch (e) {
      setActionError(e);
    }
  };
  return (
    <section>
      <h1>
        Template {tpl.name} <CopyID id={tpl.id} />
      </h1>
      <dl class="info">
        <dt>Latest version</dt>
        <dd>v{tpl.latestVersion}</dd>
        <dt>Image</dt>
        <dd>{tpl.spec?.image}</dd>
        {tpl.description && (
          <>
            <dt>Description</dt>
            <dd>{tpl.description}</dd>
          </>
        )}
        <dt>Updated</dt>
        <dd>
          <Time iso={tpl.updatedAt} />
        </dd>
      </dl>
      <div class="actions">
        <a href={`/sandboxes?template=${encodeURIComponent(tpl.name)}`}>Create a sandbox from it</a>
        <button type="button" class="danger" onClick={remove}>
          Delete
        </button>
      </div>
      {actionError !== undefined && <ErrorBox error={actionError} />}
      <h2>Versions</h2>
      <Loaded state={versions}>
        {(d) => (
          <table class="list versions">
            <thead>
              <tr>
                <th>Version</th>
                <th>Changelog</th>
                <th>Image</th>
                <th>Made</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {d.items.map((v) => (
                <tr key={v.id} aria-current={(shown || tpl.latestVersion) === v.version ? "true" : undefined}>
                  <td>v{v.version}</td>
                  <td>{v.changelog}</td>
                  <td>{v.spec.image}</td>
                  <td>
                    <Time iso={v.createdAt} />
                  </td>
                  <td class="row-actions">
                    <button
                      type="button"
                      onClick={() => {
                        setShown(v.version);
                        setDiff(false);
                      }}
                    >
                      YAML
                    </button>
                    {v.version !== tpl.latestVersion && (
                      <button
                        type="button"
                        onClick={() => {
                          setShown(v.version);
                          setDiff(true);
                        }}
                      >
                        Diff v{v.version} with v{tpl.latestVersion}
                      </button>
                    )}
                    {v.version !== tpl.latestVersion && (
                      <button type="button" onClick={() => rollback(v.version)}>
                        Roll back to v{v.version}
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
      {diff && shown ? (
        <>
          <h2>
            v{shown} → v{tpl.latestVersion}
          </h2>
          <Loaded state={latest}>{(to) => <Loaded state={yaml}>{(from) => <Diff from={from} to={to} />}</Loaded>}</Loaded>
        </>
      ) : (
        <>
          <h2>YAML of v{shown || tpl.latestVersion}</h2>
          <Loaded state={yaml}>{(text) => <pre aria-label="template YAML export">{text}</pre>}</Loaded>
        </>
      )}
    </section>
  );
}

/** The lines from removed and to added, marked, the rest as they are. */
function Diff({ from, to }: { from: string; to: string }) {
  return (
    <pre class="diff" aria-label="template YAML diff">
      {lineDiff(from, to).map((l, i) => (
        <span key={i} class={l.op === "-" ? "diff-del" : l.op === "+" ? "diff-add" : undefined}>
          {l.op} {l.text}
          {"\n"}
        </span>
      ))}
    </pre>
  );
}
