// A terminal into a sandbox: xterm.js over the interactive-exec WebSocket
// (LiteBoxd's JSON frames, on a pseudo-terminal), authenticated by a
// one-time ticket so that the key never goes into a URL. This module is
// its own chunk, loaded when a terminal opens.
//
// Tab goes to the shell (its completion needs it), so that a keyboard
// cannot leave the terminal by it: Ctrl+M, as in VS Code's terminal,
// toggles whether Tab (and Shift+Tab) moves the focus instead. The bar
// above the terminal says which, and the terminal's input is described by
// it.
import "@xterm/xterm/css/xterm.css";
import { FitAddon } from "@xterm/addon-fit";
import { Terminal as XTerm } from "@xterm/xterm";
import { useEffect, useId, useRef, useState } from "preact/hooks";
import { apiKey, call, wsURL } from "./api";

type Frame =
  | { type: "output"; data: string }
  | { type: "exit"; exitCode: number; signal?: string }
  | { type: "error"; message: string };

/** Whether e is Ctrl+M, which toggles what Tab does (the key's place: any layout). */
const isTabModeKey = (e: KeyboardEvent) => e.code === "KeyM" && e.ctrlKey && !e.altKey && !e.metaKey && !e.shiftKey;

export function Terminal({ sandbox, onClose }: { sandbox: string; onClose: () => void }) {
  const box = useRef<HTMLDivElement>(null);
  const [state, setState] = useState("connecting");
  const [session, setSession] = useState(0);
  // Whether Tab moves the focus (else it goes to the shell); the ref is
  // what the key handler, set up once a session, reads.
  const [tabMoves, setTabMoves] = useState(false);
  const tabMovesRef = useRef(tabMoves);
  tabMovesRef.current = tabMoves;
  const keysHint = useId();
  useEffect(() => {
    const term = new XTerm({ cursorBlink: true, fontSize: 14, convertEol: false });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box.current!);
    term.textarea?.setAttribute("aria-describedby", keysHint);
    // false: xterm.js leaves the key alone, and the browser does what it
    // does with it (Tab: the next control).
    term.attachCustomKeyEventHandler((e) => {
      if (isTabModeKey(e)) {
        if (e.type === "keydown") setTabMoves((on) => !on);
        e.preventDefault(); // not a carriage return (^M) to the shell: Enter is one
        return false;
      }
      return !(e.key === "Tab" && tabMovesRef.current && !e.ctrlKey && !e.altKey && !e.metaKey);
    });
    fit.fit();
    let ws: WebSocket | undefined;
    let closed = false;
    const send = (f: object) => ws?.readyState === WebSocket.OPEN && ws.send(JSON.stringify(f));
    const path = `/api/v1/sandboxes/${encodeURIComponent(sandbox)}/exec/interactive`;
    (async () => {
      const q = new URLSearchParams({ tty: "true", cols: String(term.cols), rows: String(term.rows) });
      if (apiKey()) {
        const t = await call<{ ticket: string }>("POST", path + "/ticket");
        q.set("ticket", t.ticket);
      }
      if (closed) return;
      ws = new WebSocket(wsURL(path + "?" + q));
      ws.onopen = () => {
        setState("connected");
        term.focus();
      };
      ws.onmessage = (e) => {
        const f = JSON.parse(e.data as string) as Frame;
        if (f.type === "output") term.write(f.data);
        else if (f.type === "exit") {
          term.write(`\r\n[exited ${f.signal ? "on " + f.signal : f.exitCode}]\r\n`);
          setState("exited");
        } else if (f.type === "error") term.write(`\r\n[error: ${f.message}]\r\n`);
      };
      ws.onclose = () => setState((s) => (s === "exited" ? s : "disconnected"));
    })().catch((e) => {
      term.write(`[could not connect: ${(e as Error).message}]\r\n`);
      setState("disconnected");
    });
    const input = term.onData((data) => send({ type: "input", data }));
    const resize = term.onResize(({ cols, rows }) => send({ type: "resize", cols, rows }));
    const observer = new ResizeObserver(() => fit.fit());
    observer.observe(box.current!);
    return () => {
      closed = true;
      observer.disconnect();
      input.dispose();
      resize.dispose();
      ws?.close();
      term.dispose();
    };
  }, [sandbox, session]);
  return (
    <div class="terminal">
      <div class="terminal-bar">
        <span class={`term-state term-${state}`} aria-live="polite">
          {state}
        </span>
        {state !== "connected" && state !== "connecting" && (
          <button type="button" onClick={() => setSession((n) => n + 1)}>
            Reconnect
          </button>
        )}
        <button type="button" aria-pressed={tabMoves} onClick={() => setTabMoves((on) => !on)}>
          Tab moves focus
        </button>
        <button type="button" onClick={onClose}>
          Close
        </button>
        <span class="hint" id={keysHint}>
          {tabMoves
            ? "Tab moves the focus out of the terminal; Ctrl+M gives it back to the shell."
            : "Tab goes to the shell; Ctrl+M makes it move the focus out of the terminal."}
        </span>
      </div>
      <div class="terminal-screen" ref={box} data-testid="terminal" />
    </div>
  );
}
