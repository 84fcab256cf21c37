// Small pieces every page uses. Text from the API is always rendered as
// text (JSX children), never as HTML.
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { advice, type Kind } from "./advice";
import { APIError } from "./api";
import { absolute, relative } from "./format";

/** A time relative to now, absolute on hover. */
export function Time({ iso }: { iso: string }) {
  return (
    <time dateTime={iso} title={absolute(iso)}>
      {relative(iso)}
    </time>
  );
}

/**
 * Copies the text of el to the clipboard: by the clipboard API, which only
 * a secure context has (https, or http on localhost), else by selecting it
 * and the browser's Copy command. Reports whether it was copied; when not,
 * the text is left selected, for the person to copy.
 */
async function copyText(el: HTMLElement): Promise<boolean> {
  const text = el.textContent ?? "";
  if (navigator.clipboard) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // refused (no permission, the page not focused): as without it
    }
  }
  const selection = getSelection();
  if (!selection) return false;
  const range = document.createRange();
  range.selectNodeContents(el);
  selection.removeAllRanges();
  selection.addRange(range);
  let copied = false;
  try {
    copied = document.execCommand("copy");
  } catch {
    // a browser without the command: left selected
  }
  if (copied) selection.removeAllRanges();
  return copied;
}

/** The keys that copy a selection here. */
const copyKeys = /Mac|iPhone|iPad/.test(navigator.platform) ? "\u2318C" : "Ctrl+C";

/** An id with a button that copies it, saying when it could not: then the id is selected. */
export function CopyID({ id }: { id: string }) {
  const [copied, setCopied] = useState<boolean>();
  const code = useRef<HTMLElement>(null);
  return (
    <span class="id">
      <code ref={code}>{id}</code>
      <button type="button" class="copy" aria-label={`copy ${id}`} onClick={() => copyText(code.current!).then(setCopied)}>
        {copied ? "copied" : "copy"}
      </button>
      {copied === false && (
        <span class="hint" role="status">
          selected: press {copyKeys} to copy it
        </span>
      )}
    </span>
  );
}

/** A status, and under it the reason for it when there is one. */
export function Status({ status, reason }: { status: string; reason?: string }) {
  return (
    <>
      <span class={`status status-${status}`}>{status}</span>
      {reason && <div class="reason">{reason}</div>}
    </>
  );
}

/** What went wrong and what to do about it; kind is what was asked for (advice). */
export function ErrorBox({ error, retry, kind }: { error: unknown; retry?: () => void; kind?: Kind }) {
  const e = error as Partial<APIError>;
  const todo = advice(e.status, e.code, kind);
  return (
    <div class="error" role="alert">
      <strong>{e.code ? `${e.code}: ` : ""}</strong>
      {e.message ?? String(error)}
      {todo && <p>{todo}</p>}
      {retry && (
        <button type="button" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

/** A stream that was cut, followed again in a moment: what it follows and why it was cut. */
export function Reconnecting({ cut, what }: { cut: unknown; what: string }) {
  return (
    <p class="hint" role="status">
      Following {what} again in a moment: {cut instanceof Error ? cut.message : String(cut)}
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

export interface Async<T> {
  data?: T;
  error?: unknown;
  loading: boolean;
  reload: () => void;
}

/**
 * What an async load (of a kind of thing, when given) has come to: its
 * error (with a retry), "Loading…", its empty state when empty says it is
 * empty, else children of its data.
 */
export function Loaded<T>({
  state,
  kind,
  empty,
  children,
}: {
  state: Async<T>;
  kind?: Kind;
  empty?: (data: T) => ComponentChildren;
  children: (data: T) => ComponentChildren;
}) {
  if (state.error) return <ErrorBox error={state.error} retry={state.reload} kind={kind} />;
  if (state.data === undefined) return <p class="loading">Loading…</p>;
  const none = empty?.(state.data);
  return none ? <Empty>{none}</Empty> : <>{children(state.data)}</>;
}

/**
 * Runs load when deps change (aborting the previous one) and on reload.
 * A load that fails keeps the data of the last that did not, with its error.
 */
export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Async<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [n, setN] = useState(0);
  useEffect(() => {
    const ctl = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    load(ctl.signal).then(
      (data) => setState({ data, loading: false }),
      // The last data stays beside the error: a page may go on showing it.
      (error) => {
        if ((error as Error).name !== "AbortError") setState((s) => ({ data: s.data, error, loading: false }));
      },
    );
    return () => ctl.abort();
  }, [...deps, n]);
  const reload = useCallback(() => setN((x) => x + 1), []);
  return { ...state, reload };
}

/** Calls f (its latest value: renders do not restart the clock) every ms while the page is visible. */
export function useInterval(f: () => void, ms: number) {
  const latest = useRef(f);
  latest.current = f;
  useEffect(() => {
    const t = setInterval(() => document.visibilityState === "visible" && latest.current(), ms);
    return () => clearInterval(t);
  }, [ms]);
}
