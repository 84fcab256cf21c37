// A list shown newest first with a live tail: the items a follow sent
// since the list was read, merged into it.

/**
 * The items to show of a page listed newest first and of a tail, the items
 * a follow sent since the page was read, in the order it sent them: those
 * of the tail the page does not have, the last sent first, then the
 * page's, each as the tail last sent it if it did (an exchange in progress
 * when the page was read has ended since).
 */
export function withTail<T extends { id: string }>(page: T[], tail: T[]): T[] {
  const sent = new Map(tail.map((x) => [x.id, x]));
  const listed = new Set(page.map((x) => x.id));
  const added = [...sent.values()].filter((x) => !listed.has(x.id)).reverse();
  return [...added, ...page.map((x) => sent.get(x.id) ?? x)];
}
