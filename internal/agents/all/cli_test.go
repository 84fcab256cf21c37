package all

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agents"
)

// TestRealCLIs runs each agent CLI, configured by its adapter, against a
// scripted model on loopback: the model asks for the CLI's shell tool to
// write agent_done.txt, then answers. It checks the file, the exit code,
// the events the parser reads, and that the CLI offered the model the
// tools of a local MCP server (the sqlite server of tasks/local-mcp).
//
// It needs the CLIs: AGENT2ENV_AGENT_CLIS names a directory holding
// claude, codex, gemini, opencode, qwen and node 22 (such as
// node_modules/.bin of agent2env/agent's npm layer, unpacked). The task
// runner's end-to-end tests run the same CLIs in sandboxes.
func TestRealCLIs(t *testing.T) {
	bin := os.Getenv("AGENT2ENV_AGENT_CLIS")
	if bin == "" {
		t.Skip("set AGENT2ENV_AGENT_CLIS to a directory with the agent CLIs to run them")
	}
	mcpServer, err := filepath.Abs(filepath.Join("..", "..", "..", "tasks", "local-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"claude-code", "codex", "gemini-cli", "opencode", "qwen-code"} {
		t.Run(name, func(t *testing.T) {
			a, _ := Get(name)
			model := newScriptedModel(t)
			dir := t.TempDir()
			home, work := filepath.Join(dir, "home"), filepath.Join(dir, "work")
			for _, d := range []string{home, work} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			db := filepath.Join(dir, "shop.db")
			if out, err := exec.Command("python3", filepath.Join(mcpServer, "make_db.py"), db).CombinedOutput(); err != nil {
				t.Fatalf("make_db.py: %v %s", err, out)
			}
			plan, err := a.Plan(agents.Input{
				Goal:    "Create the file agent_done.txt containing ok.",
				Model:   "scripted-model",
				LLMURL:  model.url,
				APIKey:  "sk-agent2env-test",
				MCP:     []agents.MCPServer{{Name: "db", Command: []string{"python3", filepath.Join(mcpServer, "sqlite_mcp.py"), db}}},
				Workdir: work,
				Home:    home,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range plan.Files {
				if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f.Path, f.Content, os.FileMode(f.Mode)); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, plan.Command[0]), plan.Command[1:]...)
			cmd.Dir = plan.Dir
			// Anything that is not loopback goes to a proxy that logs and
			// refuses it.
			proxy := newRefusingProxy(t)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8",
				"HTTPS_PROXY=" + proxy.url, "HTTP_PROXY=" + proxy.url, "https_proxy=" + proxy.url, "http_proxy=" + proxy.url,
				"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
			for k, v := range plan.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			runErr := cmd.Run()
			t.Logf("%s ran %s: %v", name, time.Since(start).Round(10*time.Millisecond), runErr)

			p := a.NewParser()
			var evs []agents.Event
			for _, l := range strings.Split(stdout.String(), "\n") {
				evs = append(evs, p.Line([]byte(l))...)
			}
			evs = append(evs, p.Close()...)
			var tools []string
			var result *agents.Event
			for i, e := range evs {
				switch e.Kind {
				case agents.KindToolCall:
					tools = append(tools, e.Tool)
				case agents.KindResult:
					result = &evs[i]
				}
			}
			t.Logf("tool calls %v, result %+v, model requests %v", tools, result, model.paths())
			if runErr != nil {
				t.Errorf("exit: %v\nstderr:\n%s\nstdout:\n%s", runErr, tail(stderr.String()), tail(stdout.String()))
			}
			if b, err := os.ReadFile(filepath.Join(work, "agent_done.txt")); err != nil || strings.TrimSpace(string(b)) != "ok" {
				t.Errorf("agent_done.txt = %q, %v", b, err)
			}
			if len(tools) == 0 {
				t.Errorf("the parser saw no tool call in:\n%s", tail(stdout.String()))
			}
			if result == nil || result.IsError {
				t.Errorf("result %+v", result)
			}
			if dir := os.Getenv("AGENT2ENV_RECORD_DIR"); dir != "" {
				os.WriteFile(filepath.Join(dir, name+".jsonl"), stdout.Bytes(), 0o644)
			}
			// opencode's one background fetch of its plugin package from the
			// npm registry is known and harmless (docs/agent-clis.md).
			for _, req := range proxy.requests() {
				if name == "opencode" && strings.Contains(req, "registry.npmjs.org") {
					continue
				}
				t.Errorf("%s reached for the network: %s", name, req)
			}
			if !model.sawTool("query") {
				t.Errorf("the model was not offered the db server's query tool: the MCP config did not take")
			}
		})
	}
}

// refusingProxy logs the first line of every request sent to it (a
// CONNECT for HTTPS) and answers 403.
type refusingProxy struct {
	url  string
	mu   sync.Mutex
	seen []string
}

func newRefusingProxy(t *testing.T) *refusingProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &refusingProxy{url: "http://" + l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				p.mu.Lock()
				p.seen = append(p.seen, strings.TrimSpace(line))
				p.mu.Unlock()
				io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return p
}

func (p *refusingProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// scriptedModel answers the four wire formats the CLIs speak, streaming:
// a first call gets a call of the request's shell tool, a call that
// carries the tool's result gets a final text, and a call without tools
// (opencode's title) gets a title.
type scriptedModel struct {
	url   string
	mu    sync.Mutex
	seen  []string // request paths
	tools []string // tool names offered, over all requests
}

func newScriptedModel(t *testing.T) *scriptedModel {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &scriptedModel{url: "http://" + l.Addr().String()}
	srv := &http.Server{Handler: m}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return m
}

func (m *scriptedModel) paths() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen...)
}

func (m *scriptedModel) sawTool(sub string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.tools {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

const shellCommand = "printf ok > agent_done.txt"

var shellTools = []string{"Bash", "bash", "run_shell_command", "exec_command", "shell"}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	json.Unmarshal(body, &req)
	names := toolNames(req)
	m.mu.Lock()
	m.seen = append(m.seen, r.URL.Path)
	m.tools = append(m.tools, names...)
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
		text = "Done: agent_done.txt contains ok."
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
	args, _ := json.Marshal(map[string]string{key: shellCommand})
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
		part = map[string]any{"functionCall": map[string]any{"name": tool, "args": map[string]any{"command": shellCommand}}}
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
