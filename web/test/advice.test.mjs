// What an error box advises (src/advice.ts, loaded with Node's type
// stripping). Run by scripts/web.sh check.
import assert from "node:assert/strict";
import { test } from "node:test";
import { advice } from "../src/advice.ts";

test("a 404 is worded by the kind of thing that is not there, which the code names or else the page", () => {
  const cases = [
    // status, code, the page's kind, want (a part of it, or "")
    [404, "TEMPLATE_NOT_FOUND", undefined, "There is no template of this name"],
    [404, "TEMPLATE_NOT_FOUND", "run", "There is no template of this name"],
    [404, "SANDBOX_NOT_FOUND", undefined, "There is no such sandbox: it may have been deleted"],
    [404, "SANDBOX_NOT_FOUND", "folder", "There is no such sandbox"],
    [404, "FILE_NOT_FOUND", "folder", "There is no folder at this path"],
    [404, "FILE_NOT_FOUND", "file", "There is no file at this path"],
    [404, "FILE_NOT_FOUND", undefined, "There is no file or folder at this path"],
    [404, "FILE_NOT_FOUND", "run", "There is no file or folder at this path"],
    [404, "VERSION_NOT_FOUND", undefined, "The template has no such version"],
    [404, "NOT_FOUND", "run", "There is no run with this id"],
    [404, "NOT_FOUND", "snapshot", "There is no such snapshot"],
    [404, "NOT_FOUND", undefined, ""],
    [404, undefined, undefined, ""],
    [0, "UNREACHABLE", "folder", "Start the daemon"],
    [403, "FORBIDDEN", undefined, "This key may not do that"],
    [400, "INVALID_REQUEST", "folder", ""],
    [undefined, undefined, undefined, ""],
  ];
  for (const [status, code, kind, want] of cases) {
    const got = advice(status, code, kind);
    const name = `${status} ${code} of a ${kind}`;
    if (want === "") assert.equal(got, "", name);
    else assert.ok(got.startsWith(want), `${name}: ${got}`);
  }
});

test("only a template or a folder's own absence is said to be one, not a deletion", () => {
  for (const [code, kind] of [["TEMPLATE_NOT_FOUND", undefined], ["FILE_NOT_FOUND", "folder"]]) {
    assert.doesNotMatch(advice(404, code, kind), /deleted/, code);
  }
});
