package agenttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// MCPPath is where a ScriptedModel also serves a remote MCP server
// (streamable HTTP, JSON answers) with one tool, MCPTool.
const (
	MCPPath = "/mcp"
	MCPTool = "http_ping"
)

// serveMCP answers the MCP requests the CLIs make of a remote server:
// initialize, tools/list, ping, and -32601 for anything else; a GET (the
// optional server-to-client stream) gets 405, which clients accept.
func serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, "bad JSON-RPC", http.StatusBadRequest)
		return
	}
	if len(msg.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
	switch msg.Method {
	case "initialize":
		version := msg.Params.ProtocolVersion
		if version == "" {
			version = "2025-06-18"
		}
		reply["result"] = map[string]any{"protocolVersion": version, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "scripted", "version": "1.0.0"}}
	case "tools/list":
		reply["result"] = map[string]any{"tools": []any{map[string]any{"name": MCPTool, "description": "Answers pong.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}}}}}
	case "ping":
		reply["result"] = map[string]any{}
	default:
		reply["error"] = map[string]any{"code": -32601, "message": "method not found"}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(reply)
}

// ScriptedModel is a model server for the agent CLIs' own tests. It
// answers the four wire formats they speak (Anthropic Messages, OpenAI
// Responses and Chat Completions, Gemini), streaming, with one script: a
// request offering a shell tool gets a call of it that writes
// agent_done.txt (ShellCommand), a request carrying the tool's result gets
// a final text (FinalText), and a request without tools (opencode's title
// call) gets a title. It records the paths called and the tools offered.
// At MCPPath it is a remote MCP server too.
// It is safe for concurrent use.
type ScriptedModel struct {
	// URL is where it listens, set by NewScriptedModel.
	URL string
	// Log, when set, gets a line per request: its path and the tools it
	// offered.
	Log   io.Writer
	mu    sync.Mutex
	seen  []string // request paths
	tools []string // tool names offered, over all requests
}

// NewScriptedModel serves a ScriptedModel on loopback until the test ends.
func NewScriptedModel(t testing.TB) *ScriptedModel {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &ScriptedModel{URL: "http://" + l.Addr().String()}
	srv := &http.Server{Handler: m}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return m
}

// Paths lists the request paths called so far.
func (m *ScriptedModel) Paths() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen...)
}

// SawTool reports whether any request offered a tool whose name contains
// sub.
func (m *ScriptedModel) SawTool(sub string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.tools {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

// ShellCommand is the command the model asks the shell tool to run, and
// FinalText its answer once the tool ran.
const (
	ShellCommand = "printf ok > agent_done.txt"
	FinalText    = "Done: agent_done.txt contains ok."
)

var shellTools = []string{"Bash", "bash", "run_shell_command", "exec_command", "shell"}

// ServeHTTP implements http.Handler.
func (m *ScriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == MCPPath {
		serveMCP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	json.Unmarshal(body, &req)
	names := toolNames(req)
	m.mu.Lock()
	m.seen = append(m.seen, r.URL.Path)
	m.tools = append(m.tools, names...)
	if m.Log != nil {
		fmt.Fprintf(m.Log, "%s tools=%s\n", r.URL.Path, strings.Join(names, ","))
	}
	m.mu.Unlock()
	shell := ""
	for _, n := range names {
		for _, s := range shellTools {
			if n == s && shell == "" {
				shell = n
			}
		}
	}
	// The tool's result is in the request: the second turn.
	done := bytes.Contains(body, []byte(`"tool_result"`)) || bytes.Contains(body, []byte(`"function_call_output"`)) ||
		bytes.Contains(body, []byte(`"functionResponse"`)) || bytes.Contains(body, []byte(`"role":"tool"`))
	text := ""
	switch {
	case shell == "":
		text = "Create agent_done.txt"
	case done:
		text = FinalText
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse := func(event string, v any) {
		b, _ := json.Marshal(v)
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	key := "command"
	if shell == "exec_command" {
		key = "cmd"
	}
	args, _ := json.Marshal(map[string]string{key: ShellCommand})
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/messages"):
		anthropic(sse, text, shell, string(args))
	case strings.HasSuffix(r.URL.Path, "/v1/responses"):
		responses(sse, text, shell, string(args))
	case strings.Contains(r.URL.Path, "/v1beta/models/"):
		gemini(sse, text, shell)
	case strings.HasSuffix(r.URL.Path, "/v1/chat/completions"):
		chat(sse, text, shell, string(args))
		fmt.Fprint(w, "data: [DONE]\n\n")
	default:
		http.Error(w, `{"error":{"message":"not scripted"}}`, http.StatusNotFound)
	}
}

// toolNames lists the tools a request offers, in any of the formats
// (codex's MCP tools come as namespaces holding functions).
func toolNames(req map[string]any) []string {
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			if n, ok := v["name"].(string); ok {
				names = append(names, n)
			}
			for _, k := range []string{"function", "tools", "functionDeclarations"} {
				if x, ok := v[k]; ok {
					walk(x)
				}
			}
		}
	}
	walk(req["tools"])
	return names
}

type sseFunc func(event string, v any)

func anthropic(sse sseFunc, text, tool, args string) {
	usage := map[string]any{"input_tokens": 100, "output_tokens": 10}
	sse("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_" + fmt.Sprint(time.Now().UnixNano()), "type": "message", "role": "assistant", "model": "scripted-model",
		"content": []any{}, "stop_reason": nil, "usage": usage}})
	stop := "end_turn"
	if text != "" {
		sse("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": text}})
	} else {
		stop = "tool_use"
		sse("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": tool, "input": map[string]any{}}})
		sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": args}})
	}
	sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}})
	sse("message_stop", map[string]any{"type": "message_stop"})
}

func responses(sse sseFunc, text, tool, args string) {
	id := fmt.Sprint("resp_", time.Now().UnixNano())
	var item map[string]any
	if text != "" {
		item = map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	} else {
		item = map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": tool, "arguments": args, "status": "completed"}
	}
	base := map[string]any{"id": id, "object": "response", "model": "scripted-model", "status": "in_progress", "output": []any{}}
	sse("response.created", map[string]any{"type": "response.created", "response": base})
	sse("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	if text != "" {
		sse("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text})
	}
	sse("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	done := map[string]any{"id": id, "object": "response", "model": "scripted-model", "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 110}}
	sse("response.completed", map[string]any{"type": "response.completed", "response": done})
}

func gemini(sse sseFunc, text, tool string) {
	part := map[string]any{"text": text}
	if text == "" {
		part = map[string]any{"functionCall": map[string]any{"name": tool, "args": map[string]any{"command": ShellCommand}}}
	}
	sse("", map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
		"modelVersion":  "scripted-model",
	})
}

func chat(sse sseFunc, text, tool, args string) {
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": "scripted-model",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	if text != "" {
		sse("", chunk(map[string]any{"role": "assistant", "content": text}, nil))
		sse("", chunk(map[string]any{}, "stop"))
	} else {
		sse("", chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": "call_1", "type": "function", "function": map[string]any{"name": tool, "arguments": args}}}}, nil))
		sse("", chunk(map[string]any{}, "tool_calls"))
	}
	sse("", map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "scripted-model", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
}
