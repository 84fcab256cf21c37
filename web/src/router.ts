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
