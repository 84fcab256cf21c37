// The API client: the daemon's REST API on its own origin (the index's
// agent2env-api meta element), the key from this tab's sessionStorage sent
// as Authorization. Nothing is kept in cookies.

/** Where the API is: the origin the console's server wrote into the index. */
export const apiOrigin: string =
  document.querySelector<HTMLMetaElement>('meta[name="agent2env-api"]')?.content || location.origin;

const keyItem = "agent2env.key";

export function apiKey(): string {
  return sessionStorage.getItem(keyItem) ?? "";
}

export function setAPIKey(key: string): void {
  if (key) sessionStorage.setItem(keyItem, key);
  else sessionStorage.removeItem(keyItem);
}

/** An error answer of the API: its status, code and message. */
export class APIError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Listeners told when the API refuses the key (401), to ask for one. */
const unauthorized = new Set<() => void>();

export function onUnauthorized(f: () => void): () => void {
  unauthorized.add(f);
  return () => unauthorized.delete(f);
}

function headers(json: boolean): Headers {
  const h = new Headers();
  const key = apiKey();
  if (key) h.set("Authorization", "Bearer " + key);
  if (json) h.set("Content-Type", "application/json");
  return h;
}

async function fail(resp: Response): Promise<never> {
  let code = "", message = `${resp.status} ${resp.statusText}`;
  try {
    const body = await resp.json();
    code = body.code ?? "";
    message = body.error ?? message;
  } catch {
    // not the API's error body: the status says it
  }
  if (resp.status === 401) unauthorized.forEach((f) => f());
  throw new APIError(resp.status, code, message);
}

/** The error of a request the API did not answer: it cannot be reached. */
function unreachable(): APIError {
  return new APIError(0, "UNREACHABLE", `the API at ${apiOrigin} cannot be reached: is the daemon running?`);
}

/** Sends a request and returns the decoded JSON answer (undefined for 204). */
export async function call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  let resp: Response;
  try {
    resp = await fetch(apiOrigin + path, {
      method,
      headers: headers(body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: "omit",
      referrerPolicy: "no-referrer",
    });
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw unreachable();
  }
  if (!resp.ok) return fail(resp);
  if (resp.status === 204) return undefined as T;
  return (await resp.json()) as T;
}

export const get = <T>(path: string, signal?: AbortSignal) => call<T>("GET", path, undefined, signal);

/** The WebSocket URL of an API path. */
export function wsURL(path: string): string {
  return apiOrigin.replace(/^http/, "ws") + path;
}

// The wire types the console reads (api/openapi.yaml).

export interface Sandbox {
  id: string;
  image: string;
  cpu: string;
  memory: string;
  ttl: number;
  /** Its status in LiteBoxd's enum, for LiteBoxd's clients: running when paused. */
  status: string;
  /** Its status as it is, paused included: what the console shows. */
  state: string;
  template?: string;
  templateVersion?: number;
  created_at: string;
  updated_at: string;
  expires_at: string;
  reason?: string;
  metadata?: Record<string, string>;
}

/** What the daemon's runtime can do where runtimes differ (GET /api/v1/capabilities). */
export interface Capabilities {
  runtime: string;
  pause: boolean;
  snapshots: boolean;
}

/** A sandbox saved with its memory (POST /api/v1/sandboxes/{id}/snapshots). */
export interface Snapshot {
  id: string;
  sandbox_id: string;
  image: string;
  template?: string;
  cpu: string;
  memory: string;
  runtime: string;
  status: string;
  stopped?: boolean;
  size_bytes: number;
  created_at: string;
}

export interface SandboxList {
  items: Sandbox[];
  nextCursor?: string;
}

export interface Stats {
  sessions: { active: number; busy: number };
  sandboxes: Record<string, number>;
  resources: {
    millicpu_committed: number;
    millicpu_capacity: number;
    memory_bytes_committed: number;
    memory_bytes_capacity: number;
  };
  executions: Record<string, number>;
  warm_pools?: { name: string; ready: number; size: number; hits: number; misses: number }[];
}

export interface ExecResponse {
  exit_code: number;
  stdout: string;
  stderr: string;
  timed_out?: boolean;
  truncated?: boolean;
  duration_ms: number;
  reason?: string;
}

export interface Logs {
  logs: string;
  events: string[];
  /** How many older events the daemon dropped, keeping the newest 1000. */
  events_dropped?: number;
}

/** One event of an event stream: its name, its id (when it has one) and its data, decoded. */
export interface StreamEvent {
  event: string;
  id?: string;
  data: unknown;
}

/**
 * Reads the event stream at path with fetch (the key goes as
 * Authorization, which EventSource cannot send), calling onOpen once the
 * API has answered with the stream, then onEvent for each event until the
 * stream ends or signal aborts. An "error" event (the API's error body:
 * the stream failed midway) ends it with that error.
 */
export async function stream(
  path: string,
  onEvent: (e: StreamEvent) => void,
  signal: AbortSignal,
  onOpen: () => void = () => {},
): Promise<void> {
  const h = headers(false);
  h.set("Accept", "text/event-stream");
  let resp: Response;
  try {
    resp = await fetch(apiOrigin + path, { headers: h, signal, credentials: "omit", referrerPolicy: "no-referrer" });
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw unreachable();
  }
  if (!resp.ok || !resp.body) return fail(resp);
  onOpen();
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    let chunk: ReadableStreamReadResult<string>;
    try {
      chunk = await reader.read();
    } catch (e) {
      if ((e as Error).name === "AbortError") throw e;
      throw new APIError(0, "UNREACHABLE", `the stream from ${apiOrigin} was cut: is the daemon running?`);
    }
    if (chunk.done) return;
    buf += chunk.value.replace(/\r\n?/g, "\n");
    let end: number;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let event = "message";
      let id: string | undefined;
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;
      const value = JSON.parse(data.join("\n"));
      if (event === "error") {
        const body = value as { error?: string; code?: string };
        throw new APIError(resp.status, body.code ?? "", body.error ?? "the stream failed");
      }
      onEvent({ event, id, data: value });
    }
  }
}

/**
 * Follows the event stream at path() as stream does, and again when it
 * ends or is cut before done() says it is over (the daemon restarted, a
 * proxy closed it), every retryMs, until signal aborts. path is asked anew
 * each time: a stream that resumes after its last event names it.
 * onState says whether the stream is open (once the API answered it: not
 * while the request waits), and the error that cut it while it is not. An
 * answer of 4xx (a bad request, a key refused, a record gone) is final:
 * follow rejects with it.
 */
export async function follow(
  path: () => string,
  onEvent: (e: StreamEvent) => void,
  signal: AbortSignal,
  opts: { done?: () => boolean; onState?: (open: boolean, cut?: unknown) => void; retryMs?: number } = {},
): Promise<void> {
  const { done = () => false, onState = () => {}, retryMs = 2000 } = opts;
  while (!signal.aborted && !done()) {
    let cut: unknown;
    try {
      await stream(path(), onEvent, signal, () => onState(true));
    } catch (e) {
      if ((e as Error).name === "AbortError") return;
      if (e instanceof APIError && e.status >= 400 && e.status < 500) throw e;
      cut = e;
    }
    if (done() || signal.aborted) return;
    onState(false, cut);
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, retryMs);
      signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
    });
  }
}

export interface Run {
  id: string;
  batch_id: string;
  task: string;
  agent: string;
  model?: string;
  repeat: number;
  status: string;
  phase: string;
  reason?: string;
  exit_code?: number;
  sandbox_id?: string;
  created_at: string;
  started_at?: string;
  ended_at?: string;
  timings_ms?: Record<string, number>;
  llm: { requests: number; input_tokens: number; output_tokens: number; cached_tokens: number; source?: string };
  conversation_id?: string;
  output_tail?: string[];
  artifacts?: { path: string; size: number }[];
  artifacts_truncated?: boolean;
  artifacts_error?: string;
}

export interface RunList {
  items: Run[];
  next_cursor?: string;
}

export interface RunEvent {
  seq: number;
  time: string;
  type: string;
  phase?: string;
  stream?: string;
  text?: string;
  kind?: string;
  tool?: string;
  tool_id?: string;
  input?: unknown;
  is_error?: boolean;
  status?: string;
  reason?: string;
}

export interface LLMExchange {
  id: string;
  sandboxId?: string;
  runId?: string;
  conversationId?: string;
  format: "openai" | "openai-responses" | "anthropic" | "gemini";
  path: string;
  model?: string;
  stream: boolean;
  status: number;
  state: string;
  error?: string;
  usage: { inputTokens?: number; outputTokens?: number };
  timeToFirstByteMs: number;
  durationMs: number;
  createdAt: string;
}

export interface LLMMessage {
  status?: number;
  body: string;
  bodyEncoding?: "base64";
}

export interface LLMExchangeDetail extends LLMExchange {
  request?: LLMMessage;
  upstreamRequest?: LLMMessage;
  upstreamResponse?: LLMMessage;
  response?: LLMMessage;
}

export interface LLMConversation {
  id: string;
  sandboxId?: string;
  runId?: string;
  startedAt: string;
  lastAt: string;
  usage: { inputTokens?: number; outputTokens?: number };
  exchanges: LLMExchange[];
}

/** Sends a GET and returns the answer's body as text. */
export async function getText(path: string, signal?: AbortSignal): Promise<string> {
  const resp = await fetch(apiOrigin + path, { headers: headers(false), signal, credentials: "omit", referrerPolicy: "no-referrer" });
  if (!resp.ok) return fail(resp);
  return resp.text();
}

/** Sends a multipart form (its Content-Type, with the boundary, set by fetch). */
export async function postForm<T>(path: string, form: FormData): Promise<T> {
  const resp = await fetch(apiOrigin + path, {
    method: "POST",
    headers: headers(false),
    body: form,
    credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  if (!resp.ok) return fail(resp);
  return (await resp.json()) as T;
}

/** Fetches path's body as a Blob. */
export async function getBlob(path: string): Promise<Blob> {
  const resp = await fetch(apiOrigin + path, { headers: headers(false), credentials: "omit", referrerPolicy: "no-referrer" });
  if (!resp.ok) return fail(resp);
  return resp.blob();
}

/**
 * Downloads path's body as the file name: fetched with the key as
 * Authorization (a link could not send it), then saved from memory.
 */
export async function download(path: string, name: string): Promise<void> {
  const blob = await getBlob(path);
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

export interface TemplateSpec {
  image: string;
  resources: { cpu: string; memory: string };
  ttl: number;
  [more: string]: unknown;
}

export interface Template {
  id: string;
  name: string;
  displayName: string;
  description: string;
  tags: string[] | null;
  latestVersion: number;
  createdAt: string;
  updatedAt: string;
  spec?: TemplateSpec;
}

export interface TemplateList {
  items: Template[];
  total: number;
  page: number;
  pageSize: number;
}

export interface TemplateVersion {
  id: string;
  version: number;
  spec: TemplateSpec;
  changelog: string;
  createdBy: string;
  createdAt: string;
}

export interface ImportResult {
  total: number;
  created: number;
  updated: number;
  skipped: number;
  failed: number;
  results: { name: string; action: string; version?: number; error?: string }[];
}

export interface Image {
  ref: string;
  digest: string;
  size: number;
  layers: number;
  created: string;
  status?: string;
  progress?: { phase: string; item?: string; current?: number; total?: number };
  error?: string;
}

export interface PrepullTask {
  id: string;
  image: string;
  status: string;
  progress: { ready: number; total: number };
  template?: string;
  error?: string;
  startedAt: string;
  completedAt?: string;
}

export interface Session {
  session_id: string;
  flavor: string;
  cpu: string;
  memory: string;
  sandbox_id: string;
  languages: string[];
  created_at: string;
  last_used_at: string;
  expires_at: string;
  idle_timeout: number;
  busy: number;
  execution_count: number;
  error_count: number;
  made_by_sandbox?: string;
  made_by_run?: string;
}

export interface Context {
  context_id: string;
  type: string;
  status: string;
  created_at: string;
  language: string;
  session_name?: string;
  working_dir: string;
  sandbox_id: string;
  last_used_at: string;
  execution_count: number;
  name?: string;
}

export interface LLMExchangeList {
  items: LLMExchange[];
  nextCursor?: string;
  followCursor?: string;
}

/** A file or directory of a sandbox, as GET .../files/list describes it. */
export interface FileInfo {
  name: string;
  path: string;
  size: number;
  mode: string;
  mod_time: string;
  is_dir: boolean;
}
