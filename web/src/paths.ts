// Paths in a sandbox, as the console handles them before the sandbox does.

/**
 * Whether p is a path as the sandbox resolves one: absolute, with no
 * empty, "." or ".." part and no "/" at its end ("/" itself is one). A
 * path that is not is resolved by the sandbox (against its working
 * directory when relative).
 */
export function isResolved(p: string): boolean {
  return p === "/" || (p.startsWith("/") && p.slice(1).split("/").every((part) => part !== "" && part !== "." && part !== ".."));
}

/** The directory holding p, a resolved path ("/" for "/"). */
export function parent(p: string): string {
  const i = p.lastIndexOf("/");
  return i <= 0 ? "/" : p.slice(0, i);
}
