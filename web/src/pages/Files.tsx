// A sandbox's files: upload one into a directory, download one by its
// path. The key goes as Authorization, so a download is fetched and then
// saved from memory.
import { useRef, useState } from "preact/hooks";
import { getBlob, postForm } from "../api";
import { ErrorBox } from "../ui";

export function Files({ path, disabled }: { path: string; disabled: boolean }) {
  const [dir, setDir] = useState("/workspace");
  const [name, setName] = useState("");
  const [done, setDone] = useState("");
  const [error, setError] = useState<unknown>();
  const file = useRef<HTMLInputElement>(null);
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
    if (!f) return "";
    const form = new FormData();
    const dest = dir.replace(/\/+$/, "") + "/" + f.name;
    form.set("path", dest);
    form.set("file", f);
    await postForm(path + "/files", form);
    return `Uploaded ${dest}.`;
  };
  const download = async () => {
    const blob = await getBlob(`${path}/files?path=${encodeURIComponent(name)}`);
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name.split("/").pop() || "download";
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    return `Downloaded ${name}.`;
  };
  return (
    <div class="files">
      <form
        class="exec"
        aria-label="upload a file"
        onSubmit={(e) => {
          e.preventDefault();
          run(upload);
        }}
      >
        <input type="file" ref={file} aria-label="file to upload" disabled={disabled} />
        <input
          aria-label="into directory"
          value={dir}
          disabled={disabled}
          onInput={(e) => setDir(e.currentTarget.value)}
        />
        <button type="submit" disabled={disabled}>
          Upload
        </button>
      </form>
      <form
        class="exec"
        aria-label="download a file"
        onSubmit={(e) => {
          e.preventDefault();
          run(download);
        }}
      >
        <input
          aria-label="file to download"
          placeholder="a path, e.g. /workspace/out.txt"
          value={name}
          disabled={disabled}
          onInput={(e) => setName(e.currentTarget.value)}
        />
        <button type="submit" disabled={disabled || !name.trim()}>
          Download
        </button>
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
