// A sandbox's files: a directory's entries (one request per directory),
// folders opened by a click, a file downloaded, one uploaded into the
// directory shown.
import { useRef, useState } from "preact/hooks";
import { download, get, postForm, type FileInfo } from "../api";
import { bytes } from "../format";
import { ErrorBox, Loaded, Time, useAsync } from "../ui";

const home = "/workspace";

/** The directory holding p ("/" for "/"). */
function parent(p: string): string {
  const i = p.replace(/\/+$/, "").lastIndexOf("/");
  return i <= 0 ? "/" : p.slice(0, i);
}

export function Files({ path, disabled }: { path: string; disabled: boolean }) {
  const [dir, setDir] = useState(home);
  const [typed, setTyped] = useState(home);
  const [done, setDone] = useState("");
  const [error, setError] = useState<unknown>();
  const file = useRef<HTMLInputElement>(null);
  const list = useAsync(
    (s) => (disabled ? Promise.resolve([]) : get<{ items: FileInfo[] }>(`${path}/files/list?path=${encodeURIComponent(dir)}`, s).then((l) => l.items)),
    [path, dir, disabled],
  );
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
    const dest = dir.replace(/\/+$/, "") + "/" + f.name;
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
        <button type="button" disabled={dir === "/"} onClick={() => open(parent(dir))}>
          Up
        </button>
        <input aria-label="directory" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} />
        <button type="submit">Go</button>
      </form>
      <Loaded state={list} empty={(l) => l.length === 0 && `${dir} is empty: upload a file into it below.`}>
        {(items) => (
          <table class="list" aria-label={`files in ${dir}`}>
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
              {items.map((f) => (
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
        <button type="submit">Upload into {dir}</button>
      </form>
      {done && (
        <p class="hint" role="status">
          {done}
        </p>
      )}
      {error !== undefined && <ErrorBox error={error} />}
    </div>
  );
}
