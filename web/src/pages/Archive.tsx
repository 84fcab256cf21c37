// The LLM archive, overall: one page of exchanges per request, newest first
// (filtered by model, status and time on the server; the next pages older
// ones), each exchange's transcript and raw parts fetched when opened, and
// on the first page the live tail: new exchanges from the archive's event
// stream, read with fetch, added at the top as they end.
import { useEffect, useState } from "preact/hooks";
import { follow, get, type LLMExchange, type LLMExchangeList } from "../api";
import { navigate, withParam } from "../router";
import { ExchangeTable } from "./Conversations";
import { withTail } from "../tail";
import { ErrorBox, Loaded, Reconnecting, useAsync } from "../ui";

const pageSize = 100;
const windows: [string, number][] = [
  ["the last hour", 3600],
  ["the last day", 86400],
  ["the last week", 7 * 86400],
  ["all time", 0],
];

export function Archive({ url }: { url: URL }) {
  const p = url.searchParams;
  const cursor = p.get("cursor") ?? "";
  const model = p.get("model") ?? "";
  const status = p.get("status") ?? "";
  const within = Number(p.get("within") ?? 86400);
  // The window's start, fixed while the page is shown and carried to its
  // older pages (each a page of its own), so that they page one window.
  const [since] = useState(
    () => p.get("since") ?? (within ? new Date(Date.now() - within * 1000).toISOString() : ""),
  );
  const q = new URLSearchParams({ limit: String(pageSize), order: "desc" });
  if (cursor) q.set("cursor", cursor);
  if (model) q.set("model", model);
  if (status) q.set("status", status);
  if (since) q.set("since", since);
  const list = useAsync((s) => get<LLMExchangeList>(`/api/v1/llm/exchanges?${q}`, s), [q.toString()]);
  const tail = useTail(list.data && !cursor ? list.data.followCursor : undefined, model, status);
  // A filter or the window changed, or the newest asked for: a window
  // from now, not the since of the pages shown.
  const fresh = new URL(url);
  fresh.searchParams.delete("since");
  const link = (k: string, v: string) => withParam(fresh, k, v);
  // The next older page of the same window.
  const older = (next: string) => {
    const u = new URL(url);
    if (since) u.searchParams.set("since", since);
    return withParam(u, "cursor", next);
  };
  const items = withTail(list.data?.items ?? [], tail.items);
  return (
    <section>
      <h1>LLM archive</h1>
      <form
        class="filters"
        aria-label="filters"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          const u = new URL(fresh);
          u.searchParams.delete("cursor");
          for (const k of ["model", "status"]) {
            const v = String(f.get(k) ?? "").trim();
            if (v) u.searchParams.set(k, v);
            else u.searchParams.delete(k);
          }
          navigate(u.pathname + u.search);
        }}
      >
        <label>
          Model <input name="model" defaultValue={model} placeholder="any" />
        </label>
        <label>
          Status <input name="status" defaultValue={status} placeholder="429, 5xx, complete…" />
        </label>
        <button type="submit">Filter</button>
        <label>
          Ended within{" "}
          <select value={String(within)} onChange={(e) => navigate(link("within", e.currentTarget.value))}>
            {windows.map(([label, s]) => (
              <option key={s} value={String(s)}>
                {label}
              </option>
            ))}
          </select>
        </label>
        {tail.live && (
          <span class="live" role="status">
            live: new exchanges appear at the top
          </span>
        )}
      </form>
      <Loaded
        state={list}
        empty={() =>
          items.length === 0 && (
            <>
              No exchange {model || status ? "matches the filters" : "in this time"}. Agents call models through the
              daemon's /llm base URL; without models configured, start the daemon with --llm-config.
            </>
          )
        }
      >
        {() => <ExchangeTable items={items} withOrigin />}
      </Loaded>
      {tail.error !== undefined && <ErrorBox error={tail.error} />}
      {tail.reconnecting !== undefined && <Reconnecting cut={tail.reconnecting} what="the new exchanges" />}
      <nav class="pager" aria-label="pages">
        {cursor && <a href={link("cursor", "")}>Newest</a>}
        {list.data?.nextCursor && <a href={older(list.data.nextCursor)}>Older</a>}
      </nav>
    </section>
  );
}

/**
 * The exchanges that end from cursor on, as the archive's stream sends
 * them; following stops when cursor is undefined or the page goes. A
 * stream that is cut (the daemon restarted: it says to follow again after
 * the last event's id) is followed again from there; reconnecting is what
 * cut it meanwhile.
 */
function useTail(cursor: string | undefined, model: string, status: string) {
  const [items, setItems] = useState<LLMExchange[]>([]);
  const [error, setError] = useState<unknown>();
  const [live, setLive] = useState(false);
  const [reconnecting, setReconnecting] = useState<unknown>();
  useEffect(() => {
    setItems([]);
    setError(undefined);
    setReconnecting(undefined);
    if (cursor === undefined) return;
    const ctl = new AbortController();
    let after = cursor;
    follow(
      () => {
        const q = new URLSearchParams({ after });
        if (model) q.set("model", model);
        if (status) q.set("status", status);
        return `/api/v1/llm/exchanges/stream?${q}`;
      },
      (e) => {
        if (e.event !== "exchange") return;
        if (e.id) after = e.id;
        setItems((xs) => [...xs, e.data as LLMExchange]);
      },
      ctl.signal,
      {
        onState: (open, cut) => {
          setLive(open);
          setReconnecting(open ? undefined : (cut ?? "the stream ended"));
        },
      },
    )
      .catch((e) => (e as Error).name !== "AbortError" && setError(e))
      .finally(() => setLive(false));
    return () => ctl.abort();
  }, [cursor, model, status]);
  return { items, error, live, reconnecting };
}
