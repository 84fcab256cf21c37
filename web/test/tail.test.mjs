// A page listed newest first with its live tail (src/tail.ts, loaded with
// Node's type stripping). Run by scripts/web.sh check.
import assert from "node:assert/strict";
import { test } from "node:test";
import { withTail } from "../src/tail.ts";

test("the tail's new items come first, the last sent at the top; the page's keep their place, as the tail last sent them", () => {
  const x = (id, state) => ({ id, state });
  const cases = [
    { name: "no tail", page: [x("c", "complete"), x("b", "complete")], tail: [], want: ["c:complete", "b:complete"] },
    { name: "no page", page: [], tail: [x("a", "complete"), x("b", "complete")], want: ["b:complete", "a:complete"] },
    {
      name: "new ones on top",
      page: [x("b", "complete"), x("a", "complete")],
      tail: [x("c", "complete"), x("d", "complete")],
      want: ["d:complete", "c:complete", "b:complete", "a:complete"],
    },
    {
      name: "one in progress on the page ends",
      page: [x("c", "in_progress"), x("b", "complete")],
      tail: [x("d", "complete"), x("c", "complete")],
      want: ["d:complete", "c:complete", "b:complete"],
    },
  ];
  for (const c of cases) {
    assert.deepEqual(
      withTail(c.page, c.tail).map((y) => `${y.id}:${y.state}`),
      c.want,
      c.name,
    );
  }
});
