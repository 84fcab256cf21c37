// Package llmtest is the conformance suite every LLM wire codec passes
// (Run), the table of conversations it uses (Cases), what each format is
// known to lose on the way (Expect), the translation of every case between
// every pair of formats as the proxy does it (Matrix: 4×4), a checker for
// canonical streams, and an in-process fake upstream that answers in any
// format.
package llmtest

import (
	"encoding/json"

	"github.com/agent2env/agent2env/internal/llm"
)

// Case is a request and the response a model gives it.
type Case struct {
	Name     string
	Request  *llm.Request
	Response *llm.Response
}

func ptr[T any](v T) *T { return &v }

// Tools used by the cases.
var (
	WeatherTool = llm.Tool{
		Name: "get_weather", Description: "Current weather for a city.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}
	TimeTool = llm.Tool{
		Name: "get_time", Description: "Local time in a time zone.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"tz":{"type":"string"}}}`),
	}
)

func user(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleUser, Parts: parts} }
func assistant(parts ...llm.Part) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Parts: parts}
}

func call(id, name, args string) llm.Part {
	return llm.Part{Type: llm.PartToolCall, ID: id, Name: name, Arguments: args}
}

func result(id, text string) llm.Part {
	return llm.Part{Type: llm.PartToolResult, ID: id, Content: []llm.Part{llm.Text(text)}}
}

func thinking(id, text, sig string) llm.Part {
	return llm.Part{Type: llm.PartThinking, ID: id, Text: text, Signature: sig}
}

// Cases is the table of conversations: plain text, a system prompt with
// sampling settings, multi-turn, images, tool calls and results in the
// history, parallel tool calls in the answer, thinking with signatures,
// an error result, cached usage, a forced tool choice, namespaced tools,
// stop reasons, and text that needs escaping. Each call returns fresh
// values.
func Cases() []Case {
	return []Case{
		{
			Name:     "plain",
			Request:  &llm.Request{Model: "test-model", MaxTokens: 100, Messages: []llm.Message{user(llm.Text("Hello"))}},
			Response: &llm.Response{ID: "msg_1", Model: "test-model-1", Content: []llm.Part{llm.Text("Hi there!")}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 12, OutputTokens: 5}},
		},
		{
			Name: "system",
			Request: &llm.Request{
				Model: "test-model", MaxTokens: 256, Temperature: ptr(0.5), TopP: ptr(0.9), Stop: []string{"END"},
				System:   []llm.Part{llm.Text("You are terse.")},
				Messages: []llm.Message{user(llm.Text("Count to three, then say END."))},
			},
			Response: &llm.Response{ID: "msg_2", Model: "test-model-1", Content: []llm.Part{llm.Text("1 2 3 ")}, StopReason: llm.StopSequence, StopSequence: "END", Usage: llm.Usage{InputTokens: 20, OutputTokens: 6}},
		},
		{
			Name: "multi_turn",
			Request: &llm.Request{Model: "test-model", MaxTokens: 100, Messages: []llm.Message{
				user(llm.Text("My name is Ada.")), assistant(llm.Text("Nice to meet you, Ada.")), user(llm.Text("What is my name?")),
			}},
			Response: &llm.Response{ID: "msg_3", Model: "test-model-1", Content: []llm.Part{llm.Text("Ada.")}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 30, OutputTokens: 2}},
		},
		{
			Name: "images",
			Request: &llm.Request{Model: "test-model", MaxTokens: 100, Messages: []llm.Message{user(
				llm.Text("What is in these images?"),
				llm.Part{Type: llm.PartImage, MediaType: "image/png", Data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="},
				llm.Part{Type: llm.PartImage, MediaType: "image/jpeg", URL: "https://example.com/cat.jpg"},
			)}},
			Response: &llm.Response{ID: "msg_4", Model: "test-model-1", Content: []llm.Part{llm.Text("A pixel and a cat.")}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 900, OutputTokens: 6}},
		},
		{
			Name: "tool_history",
			Request: &llm.Request{
				Model: "test-model", MaxTokens: 200, Tools: []llm.Tool{WeatherTool, TimeTool},
				ToolChoice: &llm.ToolChoice{Mode: llm.ToolChoiceAuto},
				Messages: []llm.Message{
					user(llm.Text("Weather and time in Paris?")),
					assistant(llm.Text("Checking."), call("call_1", "get_weather", `{"city":"Paris"}`), call("call_2", "get_time", `{"tz":"Europe/Paris"}`)),
					user(result("call_1", "18C, sunny"), result("call_2", "14:05")),
				},
			},
			Response: &llm.Response{ID: "msg_5", Model: "test-model-1", Content: []llm.Part{llm.Text("It is 18C and 14:05 in Paris.")}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 120, OutputTokens: 12}},
		},
		{
			Name: "parallel_calls",
			Request: &llm.Request{Model: "test-model", MaxTokens: 200, Tools: []llm.Tool{WeatherTool},
				Messages: []llm.Message{user(llm.Text("Weather in Paris and in Tokyo?"))}},
			Response: &llm.Response{ID: "msg_6", Model: "test-model-1", Content: []llm.Part{
				llm.Text("Let me look."),
				call("call_a", "get_weather", `{"city":"Paris"}`),
				call("call_b", "get_weather", `{"city":"Tokyo","units":{"temp":"C","list":[1,2,3]}}`),
			}, StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 40, OutputTokens: 30}},
		},
		{
			Name: "thinking",
			Request: &llm.Request{Model: "test-model", MaxTokens: 16000, Reasoning: &llm.Reasoning{BudgetTokens: 4096},
				Messages: []llm.Message{
					user(llm.Text("What is 6*7?")),
					assistant(thinking("rs_1", "6*7 is 42.", "sig-abc"), llm.Text("42")),
					user(llm.Text("And 7*8?")),
				}},
			Response: &llm.Response{ID: "msg_7", Model: "test-model-1", Content: []llm.Part{
				thinking("rs_2", "7*8: 7*7=49, plus 7 is 56.", "sig-def"), llm.Text("56"),
			}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 50, OutputTokens: 40, ReasoningTokens: 20}},
		},
		{
			Name: "tool_error",
			Request: &llm.Request{Model: "test-model", MaxTokens: 200, Tools: []llm.Tool{WeatherTool}, Messages: []llm.Message{
				user(llm.Text("Weather in Atlantis?")),
				assistant(call("call_x", "get_weather", `{"city":"Atlantis"}`)),
				user(llm.Part{Type: llm.PartToolResult, ID: "call_x", Content: []llm.Part{llm.Text("unknown city")}, IsError: true}),
			}},
			Response: &llm.Response{ID: "msg_8", Model: "test-model-1", Content: []llm.Part{llm.Text("Atlantis is not a real city.")}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 60, OutputTokens: 8}},
		},
		{
			Name: "cached",
			Request: &llm.Request{Model: "test-model", MaxTokens: 100,
				System:   []llm.Part{{Type: llm.PartText, Text: "A long shared context.", CacheControl: json.RawMessage(`{"type":"ephemeral"}`)}},
				Messages: []llm.Message{user(llm.Text("Summarize."))}},
			Response: &llm.Response{ID: "msg_9", Model: "test-model-1", Content: []llm.Part{llm.Text("Summary.")}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 1200, OutputTokens: 20, CachedTokens: 1000, CacheWriteTokens: 100}},
		},
		{
			Name: "tool_choice",
			Request: &llm.Request{Model: "test-model", MaxTokens: 100, Tools: []llm.Tool{WeatherTool, TimeTool},
				ToolChoice: &llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "get_time"}, ParallelToolCalls: ptr(false),
				Messages: []llm.Message{user(llm.Text("Time in Tokyo?"))}},
			Response: &llm.Response{ID: "msg_10", Model: "test-model-1", Content: []llm.Part{call("call_t", "get_time", `{"tz":"Asia/Tokyo"}`)}, StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 30, OutputTokens: 10}},
		},
		{
			Name: "namespaces",
			Request: &llm.Request{Model: "test-model", MaxTokens: 100,
				Tools: []llm.Tool{{Namespace: "mcp__h", Name: "http_ping", Description: "Ping.", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}},
				Messages: []llm.Message{
					user(llm.Text("Ping it.")),
					assistant(llm.Part{Type: llm.PartToolCall, ID: "call_n", Namespace: "mcp__h", Name: "http_ping", Arguments: `{}`}),
					user(result("call_n", "pong")),
				}},
			Response: &llm.Response{ID: "msg_11", Model: "test-model-1", Content: []llm.Part{
				{Type: llm.PartToolCall, ID: "call_m", Namespace: "mcp__h", Name: "http_ping", Arguments: `{"n":2}`},
			}, StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 30, OutputTokens: 10}},
		},
		{
			Name:     "max_tokens",
			Request:  &llm.Request{Model: "test-model", MaxTokens: 3, Messages: []llm.Message{user(llm.Text("Write a long story."))}},
			Response: &llm.Response{ID: "msg_12", Model: "test-model-1", Content: []llm.Part{llm.Text("Once upon a")}, StopReason: llm.StopMaxTokens, Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}},
		},
		{
			Name:    "escaping",
			Request: &llm.Request{Model: "test-model", MaxTokens: 100, Messages: []llm.Message{user(llm.Text("Quote <this> & \"that\"\n\ttabbed \u2028 ünïcödé 🚀"))}},
			Response: &llm.Response{ID: "msg_13", Model: "test-model-1", Content: []llm.Part{
				llm.Text("First part. "), llm.Text("Zweiter Teil – ünïcödé 🚀\n\"quoted\" \\ <b>&amp;</b> \x01"),
			}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 10, OutputTokens: 20}},
		},
	}
}
