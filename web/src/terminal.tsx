// A terminal into a sandbox: xterm.js over the interactive-exec WebSocket
// (LiteBoxd's JSON frames, on a pseudo-terminal), authenticated by a
// one-time ticket so that the key never goes into a URL. This module is
// its own chunk, loaded when a terminal opens.
import "@xterm/xterm/css/xterm.css";
import { FitAddon } from "@xterm/addon-fit";
import { Terminal as XTerm } from "@xterm/xterm";
import { useEffect, useRef, useState } from "preact/hooks";
import { apiKey, call, wsURL } from "./api";

type Frame =
  | { type: "output"; data: string }
  | { type: "exit"; exitCode: number; signal?: string }
  | { type: "error"; message: string };

export function Terminal({ sandbox, onClose }: { sandbox: string; onClose: () => void }) {
  const box = useRef<HTMLDivElement>(null);
  const [state, setState] = useState("connecting");
  const [session, setSession] = useState(0);
  useEffect(() => {
    const term = new XTerm({ cursorBlink: true, fontSize: 14, convertEol: false });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box.current!);
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
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      <div class="terminal-screen" ref={box} data-testid="terminal" />
    </div>
  );
}
