"""The official Python SDKs (openai, anthropic, google-genai) against the LLM proxy.

Driven by TestPythonSDKs: every client format against every
upstream model the Go test configured (LLM_MODELS), plain and streaming,
each a two-turn tool-call round trip. The SDKs' own stream helpers must
produce the expected message: text, tool calls with complete JSON
arguments, stop reason and usage.
"""

import json
import os

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

BASE = os.environ["LLM_BASE"]  # …/llm
KEY = "sandbox-placeholder-key"
MODELS = os.environ["LLM_MODELS"].split(",")
QUESTION = "Weather in Paris and in Tokyo?"
RESULTS = {"Paris": "18C", "Tokyo": "22C"}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"type": "object"}},
    "required": ["city"],
}
TURN1 = (
    "Let me look.",
    [
        ("get_weather", {"city": "Paris", "units": {"temp": "C", "days": [1, 2]}}),
        ("get_weather", {"city": "Tokyo"}),
    ],
    "tool_use",
    (40, 30),
)
TURN2 = ("Paris 18C, Tokyo 22C.", [], "end_turn", (80, 10))


def check(turn, want):
    text, calls, stop, usage = turn
    assert text == want[0]
    assert [(name, args) for _, name, args in calls] == want[1]
    assert all(call_id for call_id, _, _ in calls), calls
    assert stop == want[2]
    assert usage == want[3]


def openai_chat(model, stream):
    c = openai.OpenAI(base_url=BASE + "/v1", api_key=KEY, max_retries=0)
    msgs = [{"role": "user", "content": QUESTION}]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]

    def ask():
        if stream:
            with c.chat.completions.stream(
                model=model, messages=msgs, tools=tools, stream_options={"include_usage": True}
            ) as s:
                for _ in s:
                    pass
                r = s.get_final_completion()
        else:
            r = c.chat.completions.create(model=model, messages=msgs, tools=tools)
        ch = r.choices[0]
        calls = [
            (tc.id, tc.function.name, json.loads(tc.function.arguments))
            for tc in ch.message.tool_calls or []
        ]
        stop = {"tool_calls": "tool_use", "stop": "end_turn"}[ch.finish_reason]
        msgs.append(
            {
                "role": "assistant",
                "content": ch.message.content,
                **(
                    {
                        "tool_calls": [
                            {
                                "id": i,
                                "type": "function",
                                "function": {"name": n, "arguments": json.dumps(a)},
                            }
                            for i, n, a in calls
                        ]
                    }
                    if calls
                    else {}
                ),
            }
        )
        for call_id, _, args in calls:
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": RESULTS[args["city"]]})
        return (
            ch.message.content or "",
            calls,
            stop,
            (r.usage.prompt_tokens, r.usage.completion_tokens),
        )

    return ask(), ask()


def openai_responses(model, stream):
    c = openai.OpenAI(base_url=BASE + "/v1", api_key=KEY, max_retries=0)
    inp = [{"role": "user", "content": QUESTION}]
    tools = [{"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": False}]

    def ask():
        if stream:
            with c.responses.stream(model=model, input=inp, tools=tools) as s:
                for _ in s:
                    pass
                r = s.get_final_response()
        else:
            r = c.responses.create(model=model, input=inp, tools=tools)
        assert r.status == "completed"
        calls = []
        for it in r.output:
            if it.type == "function_call":
                calls.append((it.call_id, it.name, json.loads(it.arguments)))
                inp.append(
                    {
                        "type": "function_call",
                        "call_id": it.call_id,
                        "name": it.name,
                        "arguments": it.arguments,
                    }
                )
            elif it.type == "message":
                inp.append({"role": "assistant", "content": "".join(p.text for p in it.content)})
        for call_id, _, args in calls:
            inp.append(
                {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": RESULTS[args["city"]],
                }
            )
        stop = "tool_use" if calls else "end_turn"
        return r.output_text, calls, stop, (r.usage.input_tokens, r.usage.output_tokens)

    return ask(), ask()


def anthropic_messages(model, stream):
    c = anthropic.Anthropic(base_url=BASE, api_key=KEY, max_retries=0)
    msgs = [{"role": "user", "content": QUESTION}]
    tools = [{"name": "get_weather", "input_schema": SCHEMA}]

    def ask():
        if stream:
            with c.messages.stream(model=model, max_tokens=1024, messages=msgs, tools=tools) as s:
                for _ in s:
                    pass
                m = s.get_final_message()
        else:
            m = c.messages.create(model=model, max_tokens=1024, messages=msgs, tools=tools)
        text = "".join(b.text for b in m.content if b.type == "text")
        calls = [(b.id, b.name, b.input) for b in m.content if b.type == "tool_use"]
        msgs.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]}
        )
        if calls:
            msgs.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": i, "content": RESULTS[a["city"]]}
                        for i, _, a in calls
                    ],
                }
            )
        return text, calls, m.stop_reason, (m.usage.input_tokens, m.usage.output_tokens)

    return ask(), ask()


def gemini_generate(model, stream):
    c = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=BASE + "/"))
    config = types.GenerateContentConfig(
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(name="get_weather", parameters_json_schema=SCHEMA)
                ]
            )
        ],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents = [types.Content(role="user", parts=[types.Part(text=QUESTION)])]

    def ask():
        parts, finish, usage = [], None, None
        chunks = (
            c.models.generate_content_stream(model=model, contents=contents, config=config)
            if stream
            else [c.models.generate_content(model=model, contents=contents, config=config)]
        )
        for r in chunks:
            cand = r.candidates[0]
            parts += cand.content.parts if cand.content and cand.content.parts else []
            finish = cand.finish_reason or finish
            usage = r.usage_metadata or usage
        assert finish == types.FinishReason.STOP
        text = "".join(p.text for p in parts if p.text and not p.thought)
        calls = [
            (p.function_call.id, p.function_call.name, dict(p.function_call.args))
            for p in parts
            if p.function_call
        ]
        contents.append(types.Content(role="model", parts=parts))
        if calls:
            contents.append(
                types.Content(
                    role="user",
                    parts=[
                        types.Part(
                            function_response=types.FunctionResponse(
                                id=i, name=n, response={"output": RESULTS[a["city"]]}
                            )
                        )
                        for i, n, a in calls
                    ],
                )
            )
        stop = "tool_use" if calls else "end_turn"
        return text, calls, stop, (usage.prompt_token_count, usage.candidates_token_count)

    return ask(), ask()


CLIENTS = {
    "openai-chat": openai_chat,
    "openai-responses": openai_responses,
    "anthropic": anthropic_messages,
    "gemini": gemini_generate,
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_tool_round_trip(client, model, stream):
    turn1, turn2 = CLIENTS[client](model, stream)
    check(turn1, TURN1)
    check(turn2, TURN2)


def test_errors_in_client_format():
    with pytest.raises(anthropic.NotFoundError) as e:
        anthropic.Anthropic(base_url=BASE, api_key=KEY, max_retries=0).messages.create(
            model="nope", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert "not configured" in str(e.value)
    with pytest.raises(openai.NotFoundError):
        openai.OpenAI(base_url=BASE + "/v1", api_key=KEY, max_retries=0).chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "hi"}]
        )
