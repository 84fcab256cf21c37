// A sandbox's LLM conversations: the list in one request; a conversation's
// transcript (its last exchange holds every earlier turn) and an
// exchange's raw parts fetched when opened.
import { useState } from "preact/hooks";
import { get, getText, type LLMConversation, type LLMExchange, type LLMExchangeDetail } from "../api";
import { parseJSON, requestTurns, responseTurns, streamTurns, type Part, type Turn } from "../transcript";
import { CopyID, ErrorBox, Loaded, Time, useAsync } from "../ui";

export function Conversations({ sandbox }: { sandbox: string }) {
  const list = useAsync(
    (s) => get<{ items: LLMConversation[] }>(`/api/v1/sandboxes/${encodeURIComponent(sandbox)}/conversations`, s),
    [sandbox],
  );
  return (
    <section>
      <h1>
        Conversations of <a href={`/sandboxes/${encodeURIComponent(sandbox)}`}>{sandbox}</a>
      </h1>
      <Loaded
        state={list}
        empty={(d) =>
          d.items.length === 0 && (
            <>
              This sandbox has called no model through the LLM proxy. Agents reach it at the daemon's /llm base URL;
              without models configured, start the daemon with --llm-config.
            </>
          )
        }
      >
        {(d) => d.items.map((c) => <Conversation key={c.id} c={c} />)}
      </Loaded>
    </section>
  );
}

/** The transcript behind a button: opening it renders nothing else again. */
function TranscriptToggle({ exchange }: { exchange: LLMExchange }) {
  const [open, setOpen] = useState(false);
  return (
    <>
      <button type="button" aria-expanded={open} onClick={() => setOpen(!open)}>
        {open ? "Hide transcript" : "Show transcript"}
      </button>
      {open && <Transcript exchange={exchange} />}
    </>
  );
}

export function tokens(u: { inputTokens?: number; outputTokens?: number }) {
  return `${u.inputTokens ?? 0} in, ${u.outputTokens ?? 0} out`;
}

function Conversation({ c }: { c: LLMConversation }) {
  const last = c.exchanges[c.exchanges.length - 1];
  return (
    <article class="conversation">
      <header class="conv-head">
        <CopyID id={c.id} />
        <span>
          {c.exchanges.length} exchange{c.exchanges.length === 1 ? "" : "s"}, tokens {tokens(c.usage)}, started{" "}
          <Time iso={c.startedAt} />
        </span>
        {c.runId && <a href={`/runs/${encodeURIComponent(c.runId)}`}>its run</a>}
      </header>
      {last && <TranscriptToggle exchange={last} />}
      <ExchangeTable items={c.exchanges} />
    </article>
  );
}

/** Exchanges, a row each; withOrigin: each with where it came from and its transcript. */
export function ExchangeTable({ items, withOrigin }: { items: LLMExchange[]; withOrigin?: boolean }) {
  return (
    <table class="list exchanges">
      <thead>
        <tr>
          <th>Exchange</th>
          <th>Model</th>
          <th>Status</th>
          <th>Tokens</th>
          <th>First byte</th>
          <th>Duration</th>
        </tr>
      </thead>
      <tbody>
        {items.map((x) => (
          <ExchangeRow key={x.id} x={x} withOrigin={withOrigin} />
        ))}
      </tbody>
    </table>
  );
}

/**
 * An exchange's row; its raw parts and, with withOrigin (the archive), where
 * it came from and its transcript, fetched when opened.
 */
function ExchangeRow({ x, withOrigin }: { x: LLMExchange; withOrigin?: boolean }) {
  const [open, setOpen] = useState<"" | "raw" | "transcript">("");
  const toggle = (what: "raw" | "transcript") => setOpen(open === what ? "" : what);
  return (
    <>
      <tr class="x">
        <td>
          <code>{x.id}</code>
          <div class="reason">
            {x.format}
            {withOrigin &&
              (x.runId ? (
                <>
                  {" of "}
                  <a href={`/runs/${encodeURIComponent(x.runId)}`}>run {x.runId}</a>
                </>
              ) : x.sandboxId ? (
                <>
                  {" of "}
                  <a href={`/sandboxes/${encodeURIComponent(x.sandboxId)}/conversations`}>sandbox {x.sandboxId}</a>
                </>
              ) : (
                ""
              ))}
          </div>
          <div class="row-actions">
            <button
              type="button"
              aria-pressed={open === "raw"}
              aria-label={`raw parts of ${x.id}`}
              onClick={() => toggle("raw")}
            >
              Raw
            </button>
            {withOrigin && (
              <button
                type="button"
                aria-expanded={open === "transcript"}
                aria-label={`transcript of ${x.id}`}
                onClick={() => toggle("transcript")}
              >
                Transcript
              </button>
            )}
          </div>
        </td>
        <td>{x.model}</td>
        <td>
          {x.status} {x.state !== "complete" && <span class="reason">{x.state}</span>}
          {x.error && <div class="reason">{x.error}</div>}
        </td>
        <td>{tokens(x.usage)}</td>
        <td>{Math.round(x.timeToFirstByteMs)} ms</td>
        <td>{Math.round(x.durationMs)} ms</td>
      </tr>
      {open && (
        <tr>
          <td colSpan={6}>{open === "raw" ? <Raw id={x.id} /> : <Transcript exchange={x} />}</td>
        </tr>
      )}
    </>
  );
}

const rawParts = [
  ["request", "Request, as the client sent it"],
  ["upstream_request", "Request, as sent upstream"],
  ["upstream_response", "Answer, as the upstream sent it"],
  ["response", "Answer, as the client got it"],
] as const;

/** The four parts of an exchange, each exactly as it passed. */
function Raw({ id }: { id: string }) {
  const parts = useAsync(
    (s) =>
      Promise.all(
        rawParts.map(([p]) =>
          getText(`/api/v1/llm/exchanges/${encodeURIComponent(id)}?raw=${p}`, s).catch((e) =>
            e?.status === 404 ? undefined : Promise.reject(e),
          ),
        ),
      ),
    [id],
  );
  if (parts.error) return <ErrorBox error={parts.error} retry={parts.reload} />;
  if (!parts.data) return <p class="loading">Loading…</p>;
  return (
    <div class="raw">
      {rawParts.map(([p, label], i) => (
        <div key={p}>
          <h3>{label}</h3>
          <pre data-part={p}>{parts.data![i] ?? "(this part never happened)"}</pre>
        </div>
      ))}
    </div>
  );
}

/** The conversation up to exchange x: its request's turns and its answer. */
export function Transcript({ exchange }: { exchange: LLMExchange }) {
  const d = useAsync(
    (s) => get<LLMExchangeDetail>(`/api/v1/llm/exchanges/${encodeURIComponent(exchange.id)}`, s),
    [exchange.id],
  );
  if (d.error) return <ErrorBox error={d.error} retry={d.reload} />;
  if (!d.data) return <p class="loading">Loading…</p>;
  const x = d.data;
  const body = (m?: { body: string; bodyEncoding?: string }) => (m && !m.bodyEncoding ? parseJSON(m.body) : undefined);
  const req = body(x.request);
  const resp = body(x.response);
  const turns: Turn[] = req ? requestTurns(x.format, req) : [];
  // A streamed answer: its events put together, as far as they came.
  const streamed =
    x.stream && x.status < 400 && x.response && !x.response.bodyEncoding ? streamTurns(x.format, x.response.body) : [];
  if (resp && x.status < 400) turns.push(...responseTurns(x.format, resp));
  else if (streamed.length) turns.push(...streamed);
  if ((x.error || x.status >= 400) && !streamed.some((t) => t.role === "error"))
    turns.push({
      role: "error",
      parts: [{ kind: "error", text: x.error || x.response?.body || `status ${x.status}` }],
    });
  else if (x.stream && !streamed.length)
    turns.push({ role: "assistant", parts: [{ kind: "text", text: "(a streamed answer: see Raw)" }] });
  // A tool call's result is shown under the call.
  const results = new Map<string, Part>();
  for (const t of turns) for (const p of t.parts) if (p.kind === "tool_result") results.set(p.id, p);
  const called = new Set<string>();
  for (const t of turns) for (const p of t.parts) if (p.kind === "tool_call") called.add(p.id);
  return (
    <ol class="transcript" aria-label="transcript">
      {turns.map((t, i) => {
        const parts = t.parts.filter((p) => !(p.kind === "tool_result" && called.has(p.id)));
        return (
          parts.length > 0 && (
            <li key={i} class={`turn turn-${t.role}`}>
              <div class="role">{t.role}</div>
              {parts.map((p, j) => (
                <PartView key={j} p={p} result={p.kind === "tool_call" ? results.get(p.id) : undefined} />
              ))}
            </li>
          )
        );
      })}
    </ol>
  );
}

function PartView({ p, result }: { p: Part; result?: Part }) {
  switch (p.kind) {
    case "text":
      return <pre class="part-text">{p.text}</pre>;
    case "reasoning":
      return (
        <details class="part-reasoning">
          <summary>reasoning</summary>
          <pre>{p.text}</pre>
        </details>
      );
    case "error":
      return <pre class="part-error stderr">{p.text}</pre>;
    case "tool_call":
      return (
        <div class="part-tool">
          <div class="ev-what">
            tool call {p.name} <code class="reason">{p.id}</code>
          </div>
          <pre>{p.args}</pre>
          {result && result.kind === "tool_result" ? (
            <div class="tool-result">
              <div class="ev-what">result{result.isError ? " (error)" : ""}</div>
              <pre class={result.isError ? "stderr" : ""}>{result.text}</pre>
            </div>
          ) : (
            <div class="reason">no result yet</div>
          )}
        </div>
      );
    case "tool_result":
      return (
        <div class="tool-result">
          <div class="ev-what">result of {p.id}</div>
          <pre>{p.text}</pre>
        </div>
      );
  }
}
