// The transcript's one shape for the four wire formats (src/transcript.ts,
// loaded with Node's type stripping). Run by scripts/web.sh check.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { requestTurns, responseTurns, streamTurns } from "../src/transcript.ts";

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

// The LLM proxy's own samples of each format's streamed answer
// (internal/llm/*/testdata), put together as the answers they made.
const sample = (dir) => readFileSync(new URL(`../../internal/llm/${dir}/testdata/upstream-stream.txt`, import.meta.url), "utf8");
const weather = (city) => `{\n  "city": "${city}"\n}`;
const streams = [
  [
    "openai",
    "openai",
    [
      { kind: "reasoning", text: "The user wants two cities." },
      { kind: "tool_call", id: "chatcmpl-tool-a", name: "get_weather", args: weather("Paris") },
      { kind: "tool_call", id: "chatcmpl-tool-b", name: "get_weather", args: weather("Tokyo") },
    ],
  ],
  [
    "anthropic",
    "anthropic",
    [
      { kind: "reasoning", text: "Let me check the weather." },
      { kind: "text", text: "Okay, checking." },
      { kind: "tool_call", id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", name: "get_weather", args: '{\n  "location": "San Francisco, CA"\n}' },
      { kind: "tool_call", id: "toolu_02", name: "list_files", args: "{}" },
    ],
  ],
  [
    "gemini",
    "gemini",
    [
      { kind: "reasoning", text: "**Planning** the call" },
      { kind: "text", text: "I'll check." },
      { kind: "tool_call", id: "get_weather", name: "get_weather", args: weather("Paris") },
      { kind: "tool_call", id: "get_weather", name: "get_weather", args: weather("Tokyo") },
    ],
  ],
  [
    "openai-responses",
    "responses",
    [
      { kind: "reasoning", text: "**Listing**\nThen ping." },
      { kind: "tool_call", id: "call_X", name: "exec_command", args: '{\n  "cmd": "ls"\n}' },
      { kind: "tool_call", id: "call_Y", name: "http_ping", args: "{}" },
    ],
  ],
];
for (const [format, dir, want] of streams) {
  test(`${format}: a streamed answer, put together`, () => {
    const turns = streamTurns(format, sample(dir));
    assert.deepEqual([...new Set(turns.map((t) => t.role))], ["assistant"]);
    assert.deepEqual(turns.flatMap((t) => t.parts), want);
  });
}

test("a stream's error, after what came before it", () => {
  const text = [
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Half"}}',
    'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
  ].join("\n\n");
  assert.deepEqual(streamTurns("anthropic", text), [
    { role: "assistant", parts: [{ kind: "text", text: "Half" }] },
    { role: "error", parts: [{ kind: "error", text: "Overloaded" }] },
  ]);
});

test("a stream of an unknown format, or of no events, has no turns", () => {
  assert.deepEqual(streamTurns("nope", sample("openai")), []);
  assert.deepEqual(streamTurns("openai", "data: [DONE]\n\n"), []);
});
