// One shape for the four wire formats the LLM proxy speaks (OpenAI chat
// completions, OpenAI responses, Anthropic messages, Gemini): a
// conversation is a list of turns, each a role and its parts. A tool
// call's result is found by the call's id (Gemini's by the tool's name).

export type Part =
  | { kind: "text"; text: string }
  | { kind: "reasoning"; text: string }
  | { kind: "tool_call"; id: string; name: string; args: string }
  | { kind: "tool_result"; id: string; text: string; isError?: boolean }
  | { kind: "error"; text: string };

export interface Turn {
  role: string;
  parts: Part[];
}

// The wire formats' JSON, read defensively: any field may be missing.
type J = any;

const str = (v: J): string => (typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v, null, 2));

/** A tool call's arguments, JSON text or a value, indented. */
function args(v: J): string {
  if (typeof v === "string") {
    try {
      return JSON.stringify(JSON.parse(v), null, 2);
    } catch {
      return v;
    }
  }
  return str(v);
}

/** The text of a content that is a string or a list of text parts. */
function textOf(c: J): string {
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p === "string" ? p : (p?.text ?? p?.content ?? ""))).join("");
  return str(c);
}

function openaiMessage(m: J): Turn {
  const parts: Part[] = [];
  if (m.role === "tool") return { role: "tool", parts: [{ kind: "tool_result", id: m.tool_call_id ?? "", text: textOf(m.content) }] };
  if (m.reasoning_content) parts.push({ kind: "reasoning", text: m.reasoning_content });
  const text = textOf(m.content);
  if (text) parts.push({ kind: "text", text });
  for (const c of m.tool_calls ?? [])
    parts.push({ kind: "tool_call", id: c.id ?? "", name: c.function?.name ?? "", args: args(c.function?.arguments) });
  return { role: m.role ?? "assistant", parts };
}

function anthropicBlocks(role: string, content: J): Turn {
  if (typeof content === "string") return { role, parts: [{ kind: "text", text: content }] };
  const parts: Part[] = [];
  for (const b of content ?? []) {
    if (b.type === "text") parts.push({ kind: "text", text: b.text });
    else if (b.type === "thinking") parts.push({ kind: "reasoning", text: b.thinking ?? "" });
    else if (b.type === "tool_use") parts.push({ kind: "tool_call", id: b.id, name: b.name, args: args(b.input) });
    else if (b.type === "tool_result")
      parts.push({ kind: "tool_result", id: b.tool_use_id, text: textOf(b.content), ...(b.is_error ? { isError: true } : {}) });
  }
  return { role, parts };
}

function geminiContent(c: J): Turn {
  const parts: Part[] = [];
  for (const p of c?.parts ?? []) {
    if (p.thought && p.text) parts.push({ kind: "reasoning", text: p.text });
    else if (p.text !== undefined) parts.push({ kind: "text", text: p.text });
    else if (p.functionCall) parts.push({ kind: "tool_call", id: p.functionCall.id ?? p.functionCall.name, name: p.functionCall.name, args: args(p.functionCall.args) });
    else if (p.functionResponse)
      parts.push({ kind: "tool_result", id: p.functionResponse.id ?? p.functionResponse.name, text: str(p.functionResponse.response) });
  }
  return { role: c?.role === "model" ? "assistant" : (c?.role ?? "user"), parts };
}

function responsesItems(items: J): Turn[] {
  if (typeof items === "string") return [{ role: "user", parts: [{ kind: "text", text: items }] }];
  const turns: Turn[] = [];
  for (const it of items ?? []) {
    if (it.type === "function_call")
      turns.push({ role: "assistant", parts: [{ kind: "tool_call", id: it.call_id, name: it.name, args: args(it.arguments) }] });
    else if (it.type === "function_call_output")
      turns.push({ role: "tool", parts: [{ kind: "tool_result", id: it.call_id, text: textOf(it.output) }] });
    else if (it.type === "reasoning")
      turns.push({ role: "assistant", parts: [{ kind: "reasoning", text: (it.summary ?? []).map((s: J) => s.text).join("\n") }] });
    else if (it.role) turns.push({ role: it.role, parts: [{ kind: "text", text: textOf(it.content) }] });
  }
  return turns;
}

/** The turns of a request body. */
export function requestTurns(format: string, body: J): Turn[] {
  switch (format) {
    case "openai":
      return (body.messages ?? []).map(openaiMessage);
    case "anthropic": {
      const sys = body.system ? [{ role: "system", parts: [{ kind: "text", text: textOf(body.system) } as Part] }] : [];
      return [...sys, ...(body.messages ?? []).map((m: J) => anthropicBlocks(m.role, m.content))];
    }
    case "gemini": {
      const sys = body.systemInstruction ? [{ ...geminiContent(body.systemInstruction), role: "system" }] : [];
      return [...sys, ...(body.contents ?? []).map(geminiContent)];
    }
    case "openai-responses": {
      const sys = body.instructions ? [{ role: "system", parts: [{ kind: "text", text: body.instructions } as Part] }] : [];
      return [...sys, ...responsesItems(body.input)];
    }
  }
  return [];
}

/** The turn of a response body (JSON, not a stream). */
export function responseTurns(format: string, body: J): Turn[] {
  switch (format) {
    case "openai":
      return (body.choices ?? []).slice(0, 1).map((c: J) => openaiMessage(c.message ?? {}));
    case "anthropic":
      return [anthropicBlocks("assistant", body.content)];
    case "gemini":
      return (body.candidates ?? []).slice(0, 1).map((c: J) => geminiContent(c.content));
    case "openai-responses":
      return responsesItems(body.output).map((t) => ({ ...t, role: t.role === "tool" ? "tool" : "assistant" }));
  }
  return [];
}

/** The data of each event of an event stream's text that is JSON, in order. */
function streamData(text: string): J[] {
  const out: J[] = [];
  for (const block of text.replace(/\r\n?/g, "\n").split("\n\n")) {
    const data = block
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, ""))
      .join("\n");
    const v = data ? parseJSON(data) : undefined;
    if (v !== null && typeof v === "object") out.push(v);
  }
  return out;
}

/** The error a stream's event carries, as an error part, or undefined. */
function streamError(e: J): Part | undefined {
  const err = e.type === "error" || e.type === "response.failed" ? (e.error ?? e.response?.error ?? e) : e.error;
  return err ? { kind: "error", text: typeof err === "string" ? err : (err.message ?? str(err)) } : undefined;
}

/** OpenAI chat completion chunks: text, reasoning and tool calls by index, put together. */
function openaiStream(events: J[]): Turn[] {
  const m = { role: "assistant", reasoning_content: "", content: "", tool_calls: [] as J[] };
  for (const e of events) {
    const d = e.choices?.[0]?.delta;
    if (!d) continue;
    m.reasoning_content += d.reasoning_content ?? d.reasoning ?? "";
    if (typeof d.content === "string") m.content += d.content;
    for (const c of d.tool_calls ?? []) {
      const call = (m.tool_calls[c.index ?? m.tool_calls.length] ??= { id: "", function: { name: "", arguments: "" } });
      if (c.id) call.id = c.id;
      if (c.function?.name) call.function.name = c.function.name;
      call.function.arguments += c.function?.arguments ?? "";
    }
  }
  m.content = m.content.trim() ? m.content : "";
  m.tool_calls = m.tool_calls.filter(Boolean);
  return [openaiMessage(m)];
}

/** Anthropic message events: each content block from its start and its deltas. */
function anthropicStream(events: J[]): Turn[] {
  const blocks: J[] = [];
  for (const e of events) {
    if (e.type === "content_block_start") blocks[e.index] = { ...e.content_block, json: "" };
    const b = blocks[e.index];
    if (e.type !== "content_block_delta" || !b) continue;
    const d = e.delta ?? {};
    if (d.type === "text_delta") b.text = (b.text ?? "") + d.text;
    else if (d.type === "thinking_delta") b.thinking = (b.thinking ?? "") + d.thinking;
    else if (d.type === "input_json_delta") b.json += d.partial_json ?? "";
  }
  return [anthropicBlocks("assistant", blocks.filter(Boolean).map((b) => (b.json ? { ...b, input: b.json } : b)))];
}

/** Gemini chunks: their parts in order, adjacent texts (and thoughts) joined. */
function geminiStream(events: J[]): Turn[] {
  const parts: J[] = [];
  for (const e of events)
    for (const p of e.candidates?.[0]?.content?.parts ?? []) {
      const last = parts[parts.length - 1];
      if (typeof p.text === "string" && typeof last?.text === "string" && !p.thought === !last.thought) last.text += p.text;
      else parts.push({ ...p });
    }
  return [geminiContent({ role: "model", parts })];
}

/** OpenAI responses events: the items done, else the completed response's output. */
function responsesStream(events: J[]): Turn[] {
  let items = events.filter((e) => e.type === "response.output_item.done").map((e) => e.item);
  if (!items.length) items = events.find((e) => e.type === "response.completed")?.response?.output ?? [];
  return responsesItems(items).map((t) => ({ ...t, role: t.role === "tool" ? "tool" : "assistant" }));
}

/**
 * The turn of a streamed response body (the event stream's text, as the
 * client got it): its events put together as the answer they made, and an
 * error the stream sent.
 */
export function streamTurns(format: string, text: string): Turn[] {
  const events = streamData(text);
  const of: Record<string, (events: J[]) => Turn[]> = {
    openai: openaiStream,
    anthropic: anthropicStream,
    gemini: geminiStream,
    "openai-responses": responsesStream,
  };
  if (!of[format]) return [];
  const turns = of[format](events).filter((t) => t.parts.length > 0);
  const errors = events.map(streamError).filter((p): p is Part => p !== undefined);
  return errors.length ? [...turns, { role: "error", parts: errors }] : turns;
}

/** Parses a body as JSON, or returns undefined (a stream, not JSON). */
export function parseJSON(text: string): J {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
