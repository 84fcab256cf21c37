// A router over the History API: each page is a URL that can be shared;
// links are ordinary <a href> that navigate without a reload.
import { useEffect, useState } from "preact/hooks";

const listeners = new Set<() => void>();

export function navigate(to: string): void {
  history.pushState(null, "", to);
  listeners.forEach((f) => f());
}

addEventListener("popstate", () => listeners.forEach((f) => f()));

// Same-origin links without modifiers navigate in the app.
document.addEventListener("click", (e) => {
  const a = (e.target as Element | null)?.closest?.("a");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  if (a.origin !== location.origin || a.target || a.hasAttribute("download")) return;
  e.preventDefault();
  navigate(a.pathname + a.search);
});

/** The current location, re-rendering on navigation. */
export function useLocation(): URL {
  const [, tick] = useState(0);
  useEffect(() => {
    const f = () => tick((n) => n + 1);
    listeners.add(f);
    return () => void listeners.delete(f);
  }, []);
  return new URL(location.href);
}

/**
 * The path of url with query parameter k set to v (removed when v is
 * empty). Any other change than the page's cursor starts at the first page.
 */
export function withParam(url: URL, k: string, v: string): string {
  const u = new URL(url);
  if (k !== "cursor") u.searchParams.delete("cursor");
  if (v) u.searchParams.set(k, v);
  else u.searchParams.delete(k);
  return u.pathname + u.search;
}
