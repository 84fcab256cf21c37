// Package codex is the adapter of Codex (`codex exec`): OpenAI Responses
// to the proxy (the only wire codex speaks), provider, switches and MCP
// servers in ~/.codex/config.toml, JSONL output (--json).
package codex

import (
	"encoding/json"
	"path"

	"github.com/pelletier/go-toml/v2"

	"github.com/agent2env/agent2env/internal/agents"
)

// Adapter is Codex's adapter. The zero value is ready.
type Adapter struct{}

var _ agents.Adapter = Adapter{}

// Name implements agents.Adapter.
func (Adapter) Name() string { return "codex" }

// provider is the model provider codex is pointed at; keyEnv holds its key.
const (
	provider = "agent2env"
	keyEnv   = "AGENT2ENV_API_KEY"
)

type config struct {
	Model                   string                   `toml:"model"`
	ModelProvider           string                   `toml:"model_provider"`
	CheckForUpdateOnStartup bool                     `toml:"check_for_update_on_startup"`
	ModelProviders          map[string]modelProvider `toml:"model_providers"`
	Analytics               enabled                  `toml:"analytics"`
	Feedback                enabled                  `toml:"feedback"`
	Features                map[string]bool          `toml:"features"`
	MCPServers              map[string]mcpServer     `toml:"mcp_servers,omitempty"`
}

type modelProvider struct {
	Name    string `toml:"name"`
	BaseURL string `toml:"base_url"`
	EnvKey  string `toml:"env_key"`
	WireAPI string `toml:"wire_api"`
}

type enabled struct {
	Enabled bool `toml:"enabled"`
}

type mcpServer struct {
	URL         string            `toml:"url,omitempty"`
	HTTPHeaders map[string]string `toml:"http_headers,omitempty"`
	Command     string            `toml:"command,omitempty"`
	Args        []string          `toml:"args,omitempty"`
	Env         map[string]string `toml:"env,omitempty"`
}

// Plan implements agents.Adapter.
func (Adapter) Plan(in agents.Input) (*agents.Plan, error) {
	cfg := config{
		Model:         in.Model,
		ModelProvider: provider,
		ModelProviders: map[string]modelProvider{provider: {
			Name: provider, BaseURL: in.LLMURL + "/v1", EnvKey: keyEnv, WireAPI: "responses",
		}},
		// plugins would fetch from github.com and chatgpt.com at start.
		Features: map[string]bool{"plugins": false},
	}
	for _, s := range in.MCP {
		if cfg.MCPServers == nil {
			cfg.MCPServers = map[string]mcpServer{}
		}
		if s.Remote() {
			cfg.MCPServers[s.Name] = mcpServer{URL: s.URL, HTTPHeaders: s.Headers}
		} else {
			cfg.MCPServers[s.Name] = mcpServer{Command: s.Command[0], Args: s.Command[1:], Env: s.Env}
		}
	}
	b, err := toml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	env := agents.Env(in)
	env[keyEnv] = in.APIKey
	// --dangerously-bypass-approvals-and-sandbox: the sandbox is ours;
	// codex's own (landlock) would only get in the way.
	cmd := []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
		"-m", in.Model, agents.Prompt(in.Goal)}
	return &agents.Plan{
		Files:   []agents.File{{Path: path.Join(agents.Home(in), ".codex", "config.toml"), Content: b, Mode: 0o600}},
		Command: cmd,
		Env:     env,
		Dir:     in.Workdir,
	}, nil
}

// NewParser implements agents.Adapter.
func (Adapter) NewParser() agents.Parser { return &parser{} }

// parser reads codex exec --json: thread.started, turn.started,
// item.started / item.completed (command_execution, mcp_tool_call,
// agent_message, reasoning, file_change, error), turn.completed with the
// turn's usage, turn.failed and error.
type parser struct {
	last string // the last agent message, the run's answer
}

type line struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Item     *item  `json:"item"`
	Usage    *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error   *struct{ Message string } `json:"error"`
	Message string                    `json:"message"`
}

type item struct {
	ID               string                    `json:"id"`
	Type             string                    `json:"type"`
	Text             string                    `json:"text"`
	Command          string                    `json:"command"`
	AggregatedOutput string                    `json:"aggregated_output"`
	ExitCode         *int                      `json:"exit_code"`
	Status           string                    `json:"status"`
	Server           string                    `json:"server"`
	Tool             string                    `json:"tool"`
	Arguments        json.RawMessage           `json:"arguments"`
	Result           json.RawMessage           `json:"result"`
	Error            *struct{ Message string } `json:"error"`
	Message          string                    `json:"message"`
	Changes          json.RawMessage           `json:"changes"`
}

func (p *parser) Line(raw []byte) []agents.Event {
	var l line
	if evs, ok := agents.DecodeJSONLine(raw, &l); !ok {
		return evs
	}
	switch l.Type {
	case "thread.started":
		return []agents.Event{{Kind: agents.KindStart, Text: l.ThreadID}}
	case "item.started":
		if l.Item != nil {
			return p.started(l.Item)
		}
	case "item.completed":
		if l.Item != nil {
			return p.completed(l.Item)
		}
	case "turn.completed":
		var u *agents.Usage
		if l.Usage != nil {
			u = &agents.Usage{InputTokens: l.Usage.InputTokens, OutputTokens: l.Usage.OutputTokens, CachedTokens: l.Usage.CachedInputTokens}
		}
		// codex exec runs one turn: its end is the run's result.
		return []agents.Event{{Kind: agents.KindLLMCall, Usage: u}, {Kind: agents.KindResult, Text: p.last, Usage: u}}
	case "turn.failed":
		msg := ""
		if l.Error != nil {
			msg = l.Error.Message
		}
		return []agents.Event{{Kind: agents.KindResult, IsError: true, Text: msg}}
	case "error":
		return []agents.Event{{Kind: agents.KindError, Text: l.Message}}
	}
	return nil
}

func (p *parser) started(it *item) []agents.Event {
	switch it.Type {
	case "command_execution":
		in, _ := json.Marshal(map[string]string{"cmd": it.Command})
		return []agents.Event{{Kind: agents.KindToolCall, Tool: "exec_command", ToolID: it.ID, Input: in}}
	case "mcp_tool_call":
		return []agents.Event{{Kind: agents.KindToolCall, Tool: "mcp__" + it.Server + "__" + it.Tool, ToolID: it.ID, Input: it.Arguments}}
	}
	return nil
}

func (p *parser) completed(it *item) []agents.Event {
	switch it.Type {
	case "command_execution":
		failed := it.Status == "failed" || (it.ExitCode != nil && *it.ExitCode != 0)
		return []agents.Event{{Kind: agents.KindToolResult, ToolID: it.ID, Text: it.AggregatedOutput, IsError: failed}}
	case "mcp_tool_call":
		ev := agents.Event{Kind: agents.KindToolResult, ToolID: it.ID, IsError: it.Status == "failed" || it.Error != nil}
		if it.Error != nil {
			ev.Text = it.Error.Message
		} else {
			var r struct {
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(it.Result, &r) == nil {
				ev.Text = agents.ContentText(r.Content)
			}
		}
		return []agents.Event{ev}
	case "agent_message":
		p.last = it.Text
		return []agents.Event{{Kind: agents.KindMessage, Text: it.Text}}
	case "file_change":
		return []agents.Event{{Kind: agents.KindToolCall, Tool: "file_change", ToolID: it.ID, Input: it.Changes}}
	case "error":
		// An error item is a warning codex goes on after ("Model metadata
		// for … not found"); what ends a run is turn.failed.
		return []agents.Event{{Kind: agents.KindOutput, Text: "codex: " + it.Message}}
	}
	return nil
}

func (p *parser) Close() []agents.Event { return nil }
