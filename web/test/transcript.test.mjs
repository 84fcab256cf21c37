// The transcript's one shape for the four wire formats (src/transcript.ts,
// loaded with Node's type stripping). Run by scripts/web.sh check.
import assert from "node:assert/strict";
import { test } from "node:test";
import { requestTurns, responseTurns } from "../src/transcript.ts";

// Each format's request (a user's question, a tool call and its result)
// and answer (text), which must all read the same.
const cases = {
  openai: {
    request: {
      messages: [
        { role: "user", content: "fix it" },
        { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "ls", arguments: '{"dir":"/"}' } }] },
        { role: "tool", tool_call_id: "c1", content: "bin etc" },
      ],
    },
    response: { choices: [{ message: { role: "assistant", content: "<b>done</b>" } }] },
  },
  anthropic: {
    request: {
      messages: [
        { role: "user", content: "fix it" },
        { role: "assistant", content: [{ type: "tool_use", id: "c1", name: "ls", input: { dir: "/" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "c1", content: [{ type: "text", text: "bin etc" }] }] },
      ],
    },
    response: { content: [{ type: "text", text: "<b>done</b>" }] },
  },
  gemini: {
    request: {
      contents: [
        { role: "user", parts: [{ text: "fix it" }] },
        { role: "model", parts: [{ functionCall: { id: "c1", name: "ls", args: { dir: "/" } } }] },
        { role: "user", parts: [{ functionResponse: { id: "c1", name: "ls", response: "bin etc" } }] },
      ],
    },
    response: { candidates: [{ content: { role: "model", parts: [{ text: "<b>done</b>" }] } }] },
  },
  "openai-responses": {
    request: {
      input: [
        { type: "message", role: "user", content: [{ type: "input_text", text: "fix it" }] },
        { type: "function_call", call_id: "c1", name: "ls", arguments: '{"dir":"/"}' },
        { type: "function_call_output", call_id: "c1", output: "bin etc" },
      ],
    },
    response: { output: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "<b>done</b>" }] }] },
  },
};

const parts = (turns) => turns.flatMap((t) => t.parts.map((p) => ({ role: t.role === "tool" ? "user" : t.role, ...p })));

for (const [format, { request, response }] of Object.entries(cases)) {
  test(`${format}: question, tool call, its result, answer`, () => {
    const got = parts([...requestTurns(format, request), ...responseTurns(format, response)]).map(
      ({ role, ...p }) => [role, p],
    );
    assert.deepEqual(got, [
      ["user", { kind: "text", text: "fix it" }],
      ["assistant", { kind: "tool_call", id: "c1", name: "ls", args: '{\n  "dir": "/"\n}' }],
      ["user", { kind: "tool_result", id: "c1", text: "bin etc" }],
      ["assistant", { kind: "text", text: "<b>done</b>" }],
    ]);
  });
}

test("an unknown format has no turns", () => {
  assert.deepEqual(requestTurns("nope", { messages: [] }), []);
});
