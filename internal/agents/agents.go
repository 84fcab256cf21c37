// Package agents is what the task runner knows of each agent CLI: how to
// configure it inside a sandbox (the LLM proxy's base URL on the sandbox's
// loopback, a placeholder key, the model, the MCP servers in the CLI's own
// format), the headless command line with tool approvals granted, and how
// to read its machine-readable output as run events.
//
// Each CLI has an Adapter in a subpackage (claudecode, codex, geminicli,
// opencode, qwencode, custom), all listed in package all and tested by the
// conformance suite in agenttest. Adapters are pure: they return a Plan
// for the runner to carry out and never touch a sandbox themselves.
// Adapters and their Plans are safe for concurrent use; a Parser belongs
// to one run.
package agents

import (
	"encoding/json"
	"maps"
	"strings"
)

// Adapter configures and reads one agent CLI.
type Adapter interface {
	// Name is the agent's name in task files ("claude-code").
	Name() string
	// Plan says how to run the agent for in.
	Plan(in Input) (*Plan, error)
	// NewParser returns a parser for the standard output of one run.
	NewParser() Parser
}

// Input is what an adapter needs to know about a run.
type Input struct {
	// Goal is the instruction given to the agent.
	Goal string
	// Model is the model name the LLM proxy knows.
	Model string
	// LLMURL is the LLM proxy's base URL as the sandbox reaches it, with
	// no trailing slash and no version path ("http://127.0.0.1:4000/llm"):
	// the proxy serves /v1/messages, /v1/chat/completions, /v1/responses
	// and /v1beta/models/… under it. Adapters add "/v1" for the CLIs that
	// want it in their base URL.
	LLMURL string
	// APIKey is the key the CLI presents to the proxy: a placeholder, or a
	// token that tells the proxy which run is calling.
	APIKey string
	// MCP are the run's MCP servers, remote ones with the URL the sandbox
	// reaches them at (the daemon's own server included).
	MCP []MCPServer
	// Workdir is where the agent runs; Home is the sandbox user's $HOME,
	// where configuration files go.
	Workdir, Home string
	// Entrypoint is the custom agent's shell command.
	Entrypoint string
	// Env is the task's environment, given to the agent as it is.
	Env map[string]string
}

// MCPServer is one MCP server for the agent: remote (URL, streamable HTTP)
// or local (Command, over stdio, started by the CLI inside the sandbox).
type MCPServer struct {
	Name    string
	URL     string
	Headers map[string]string
	Command []string
	Env     map[string]string
}

// Remote reports whether s is reached by URL.
func (s MCPServer) Remote() bool { return s.URL != "" }

// Plan is how to run an agent: the runner writes Files (as the sandbox
// user, making their directories), then runs Command in Dir with Env and
// an empty, closed standard input (codex reads a non-terminal stdin as
// more prompt), and hands each line of its standard output to a Parser.
type Plan struct {
	Files   []File
	Command []string
	Env     map[string]string
	Dir     string
}

// File is a file written into the sandbox before the agent starts.
type File struct {
	// Path is absolute, in the sandbox.
	Path    string
	Content []byte
	// Mode is the permission bits; files may hold the key, so 0600.
	Mode uint32
}

// Parser turns the lines of an agent's standard output into events.
type Parser interface {
	// Line takes one line, without its newline, and returns the events
	// it completes (none, one or several).
	Line(line []byte) []Event
	// Close returns the events still held when the output ends.
	Close() []Event
}

// Kind says what an Event is.
type Kind string

// The kinds of events.
const (
	// KindStart: the agent session started (Text: its id or model).
	KindStart Kind = "start"
	// KindOutput: a line of output that is not structured.
	KindOutput Kind = "output"
	// KindMessage: text the model wrote for the user.
	KindMessage Kind = "message"
	// KindToolCall: the agent calls Tool with Input (JSON).
	KindToolCall Kind = "tool_call"
	// KindToolResult: the result of call ToolID (Text), IsError when it
	// failed.
	KindToolResult Kind = "tool_result"
	// KindLLMCall: the CLI reports a model call, or a turn of them, with
	// its tokens (Usage). The LLM proxy's own record is authoritative.
	KindLLMCall Kind = "llm_call"
	// KindResult: the agent finished; IsError when it failed, Text its
	// final answer or error, Usage its total when reported.
	KindResult Kind = "result"
	// KindError: the CLI reported an error without finishing (Text).
	KindError Kind = "error"
)

// Event is one thing an agent did, read from its output.
type Event struct {
	Kind    Kind            `json:"kind"`
	Text    string          `json:"text,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	ToolID  string          `json:"tool_id,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
	Usage   *Usage          `json:"usage,omitempty"`
}

// Usage counts tokens as a CLI reports them.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens,omitempty"`
}

// DefaultHome is the sandbox user's home in agent2env images.
const DefaultHome = "/home/sandbox"

// Env returns the environment every agent gets, the custom one included:
// the task's variables, then the proxy's base URL and key under the names
// each wire format's SDKs read, the model, the goal and the MCP servers.
// Adapters add their CLI's own switches on top.
func Env(in Input) map[string]string {
	env := maps.Clone(in.Env)
	if env == nil {
		env = map[string]string{}
	}
	set := map[string]string{
		"AGENT2ENV_LLM_URL":      in.LLMURL,
		"AGENT2ENV_API_KEY":      in.APIKey,
		"AGENT2ENV_MODEL":        in.Model,
		"AGENT2ENV_GOAL":         in.Goal,
		"ANTHROPIC_BASE_URL":     in.LLMURL,
		"ANTHROPIC_API_KEY":      in.APIKey,
		"OPENAI_BASE_URL":        in.LLMURL + "/v1",
		"OPENAI_API_KEY":         in.APIKey,
		"GOOGLE_GEMINI_BASE_URL": in.LLMURL,
		"GEMINI_API_KEY":         in.APIKey,
	}
	if len(in.MCP) > 0 {
		type server struct {
			Name    string   `json:"name"`
			URL     string   `json:"url,omitempty"`
			Command []string `json:"command,omitempty"`
		}
		var list []server
		for _, s := range in.MCP {
			list = append(list, server{s.Name, s.URL, s.Command})
			if s.Name == "agent2env" && s.Remote() {
				set["AGENT2ENV_MCP_URL"] = s.URL
			}
		}
		js, _ := json.Marshal(list) // strings only: cannot fail
		set["AGENT2ENV_MCP_SERVERS"] = string(js)
	}
	maps.Copy(env, set)
	return env
}

// Prompt returns the goal as a command-line argument: one that starts with
// '-' gets a leading space, so that no CLI takes it for an option.
func Prompt(goal string) string {
	if strings.HasPrefix(goal, "-") {
		return " " + goal
	}
	return goal
}

// Home returns in.Home, or DefaultHome when it is empty.
func Home(in Input) string {
	if in.Home == "" {
		return DefaultHome
	}
	return in.Home
}

// JSONFile is a 0600 file holding v as indented JSON.
func JSONFile(path string, v any) (File, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return File{}, err
	}
	return File{Path: path, Content: append(b, '\n'), Mode: 0o600}, nil
}

// Lines is a Parser for output with no structure: every non-empty line is
// a KindOutput event.
type Lines struct{}

// Line implements Parser.
func (Lines) Line(line []byte) []Event {
	if len(strings.TrimSpace(string(line))) == 0 {
		return nil
	}
	return []Event{{Kind: KindOutput, Text: string(line)}}
}

// Close implements Parser.
func (Lines) Close() []Event { return nil }

// DecodeJSONLine decodes a line of JSONL output into v. A line that is not
// a JSON object (a warning a CLI printed) gives the KindOutput event to
// return instead, and false.
func DecodeJSONLine(line []byte, v any) ([]Event, bool) {
	trimmed := strings.TrimSpace(string(line))
	if trimmed == "" {
		return nil, false
	}
	if !strings.HasPrefix(trimmed, "{") || json.Unmarshal([]byte(trimmed), v) != nil {
		return Lines{}.Line(line), false
	}
	return nil, true
}

// SettingsServer is an entry of "mcpServers" in the settings.json of
// gemini-cli and of its fork qwen-code: httpUrl for streamable HTTP ("url"
// would mean SSE), command, args and env for stdio.
type SettingsServer struct {
	HTTPURL string            `json:"httpUrl,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// SettingsServers returns servers in the "mcpServers" format of gemini-cli
// and qwen-code.
func SettingsServers(servers []MCPServer) map[string]SettingsServer {
	out := make(map[string]SettingsServer, len(servers))
	for _, s := range servers {
		if s.Remote() {
			out[s.Name] = SettingsServer{HTTPURL: s.URL, Headers: s.Headers}
		} else {
			out[s.Name] = SettingsServer{Command: s.Command[0], Args: s.Command[1:], Env: s.Env}
		}
	}
	return out
}
