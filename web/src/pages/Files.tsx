// A sandbox's files: a directory's entries (one request per directory),
// folders opened by a click, a file downloaded, one uploaded into the
// directory shown. A directory is shown by the absolute path the sandbox
// resolved: one typed relative (to the sandbox's working directory), or
// not clean (a "." or empty part, a "/" at its end), is described
// (files/stat) before it is listed. A ".." the API refuses, saying so.
import { useEffect, useRef, useState } from "preact/hooks";
import { download, get, postForm, type FileInfo } from "../api";
import { bytes } from "../format";
import { isResolved, parent } from "../paths";
import { ErrorBox, Loaded, Time, useAsync } from "../ui";

const home = "/workspace";

export function Files({ path, disabled }: { path: string; disabled: boolean }) {
  const [dir, setDir] = useState(home);
  const [typed, setTyped] = useState(home);
  const [done, setDone] = useState("");
  const [error, setError] = useState<unknown>();
  const file = useRef<HTMLInputElement>(null);
  // dir as asked; the listing's dir, as the sandbox resolved it.
  const list = useAsync(async (s) => {
    if (disabled) return { dir, items: [] };
    const q = (p: string) => `?path=${encodeURIComponent(p)}`;
    const abs = isResolved(dir) ? dir : (await get<FileInfo>(`${path}/files/stat${q(dir)}`, s)).path;
    const l = await get<{ items: FileInfo[] }>(`${path}/files/list${q(abs)}`, s);
    return { dir: abs, items: l.items };
  }, [path, dir, disabled]);
  const shown = list.data?.dir ?? dir;
  useEffect(() => {
    if (list.data) setTyped(list.data.dir);
  }, [list.data]);
  const open = (d: string) => {
    setDone("");
    setError(undefined);
    setDir(d);
    setTyped(d);
    list.reload(); // the same directory again: read anew
  };
  const run = async (f: () => Promise<string>) => {
    setError(undefined);
    setDone("");
    try {
      setDone(await f());
    } catch (e) {
      setError(e);
    }
  };
  const upload = async () => {
    const f = file.current?.files?.[0];
    if (!f) return "Choose a file to upload first.";
    const form = new FormData();
    const dest = shown.replace(/\/+$/, "") + "/" + f.name;
    form.set("path", dest);
    form.set("file", f);
    await postForm(path + "/files", form);
    list.reload();
    return `Uploaded ${dest}.`;
  };
  const save = async (name: string) => {
    await download(`${path}/files?path=${encodeURIComponent(name)}`, name.split("/").pop() || "download");
    return `Downloaded ${name}.`;
  };
  if (disabled) return <p class="hint">The files can be browsed while the sandbox runs: start it first.</p>;
  return (
    <div class="files">
      <form
        class="exec"
        aria-label="go to a directory"
        onSubmit={(e) => {
          e.preventDefault();
          open(typed.trim() || home);
        }}
      >
        <button type="button" disabled={shown === "/"} onClick={() => open(parent(shown))}>
          Up
        </button>
        <input aria-label="directory" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} />
        <button type="submit">Go</button>
      </form>
      <Loaded state={list} kind="folder" empty={(l) => l.items.length === 0 && `${l.dir} is empty: upload a file into it below.`}>
        {(l) => (
          <table class="list" aria-label={`files in ${l.dir}`}>
            <thead>
              <tr>
                <th>Name</th>
                <th>Size</th>
                <th>Mode</th>
                <th>Modified</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {l.items.map((f) => (
                <tr key={f.path}>
                  <td>
                    {f.is_dir ? (
                      <button type="button" class="link" aria-label={`open folder ${f.name}`} onClick={() => open(f.path)}>
                        {f.name}/
                      </button>
                    ) : (
                      f.name
                    )}
                  </td>
                  <td>{f.is_dir ? "" : bytes(f.size)}</td>
                  <td>
                    <code>{f.mode}</code>
                  </td>
                  <td>
                    <Time iso={f.mod_time} />
                  </td>
                  <td>
                    {!f.is_dir && (
                      <button type="button" aria-label={`download ${f.name}`} onClick={() => run(() => save(f.path))}>
                        Download
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
      <form
        class="exec"
        aria-label="upload a file"
        onSubmit={(e) => {
          e.preventDefault();
          run(upload);
        }}
      >
        <input type="file" ref={file} aria-label="file to upload" />
        <button type="submit">Upload into {shown}</button>
      </form>
      {done && (
        <p class="hint" role="status">
          {done}
        </p>
      )}
      {error !== undefined && <ErrorBox error={error} kind="file" />}
    </div>
  );
}
