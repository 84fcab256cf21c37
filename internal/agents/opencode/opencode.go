// Package opencode is the adapter of opencode (`opencode run`): Chat
// Completions to the proxy through the bundled @ai-sdk/openai-compatible
// provider (baseURL with /v1), provider, permissions and MCP servers in
// ~/.config/opencode/opencode.json, JSONL output (--format json).
package opencode

import (
	"encoding/json"
	"path"

	"github.com/agent2env/agent2env/internal/agents"
)

// Adapter is opencode's adapter. The zero value is ready.
type Adapter struct{}

var _ agents.Adapter = Adapter{}

// Name implements agents.Adapter.
func (Adapter) Name() string { return "opencode" }

// provider is the provider id the model is addressed under ("agent2env/M").
const provider = "agent2env"

type server struct {
	Type        string            `json:"type"`
	URL         string            `json:"url,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Command     []string          `json:"command,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
	Enabled     bool              `json:"enabled"`
}

// Plan implements agents.Adapter.
func (Adapter) Plan(in agents.Input) (*agents.Plan, error) {
	model := provider + "/" + in.Model
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"model":   model,
		// The title side call goes to the same model.
		"small_model": model,
		"autoupdate":  false,
		"share":       "disabled",
		// Approve every tool: "ask" rules are rejected in run mode.
		"permission": "allow",
		"provider": map[string]any{provider: map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    provider,
			"options": map[string]any{"baseURL": in.LLMURL + "/v1", "apiKey": in.APIKey},
			"models":  map[string]any{in.Model: map[string]any{"name": in.Model, "tool_call": true}},
		}},
	}
	if len(in.MCP) > 0 {
		servers := map[string]server{}
		for _, s := range in.MCP {
			if s.Remote() {
				servers[s.Name] = server{Type: "remote", URL: s.URL, Headers: s.Headers, Enabled: true}
			} else {
				servers[s.Name] = server{Type: "local", Command: s.Command, Environment: s.Env, Enabled: true}
			}
		}
		cfg["mcp"] = servers
	}
	f, err := agents.JSONFile(path.Join(agents.Home(in), ".config", "opencode", "opencode.json"), cfg)
	if err != nil {
		return nil, err
	}
	env := agents.Env(in)
	env["OPENCODE_DISABLE_AUTOUPDATE"] = "1"
	env["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
	cmd := []string{"opencode", "run", "--format", "json", "-m", model, agents.Prompt(in.Goal)}
	return &agents.Plan{Files: []agents.File{f}, Command: cmd, Env: env, Dir: in.Workdir}, nil
}

// NewParser implements agents.Adapter.
func (Adapter) NewParser() agents.Parser { return &parser{} }

// parser reads opencode run --format json: step_start, text, tool_use
// (the call and its result in one event), step_finish (one model call,
// with its tokens; reason "stop" ends the run) and error.
type parser struct {
	last    string
	started bool
}

type line struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Tool   string `json:"tool"`
		CallID string `json:"callID"`
		State  struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
			Output string          `json:"output"`
			Error  string          `json:"error"`
		} `json:"state"`
		Reason string `json:"reason"`
		Tokens *struct {
			Input     int64 `json:"input"`
			Output    int64 `json:"output"`
			Reasoning int64 `json:"reasoning"`
			Cache     struct {
				Read int64 `json:"read"`
			} `json:"cache"`
		} `json:"tokens"`
	} `json:"part"`
	Error json.RawMessage `json:"error"`
}

func (p *parser) Line(raw []byte) []agents.Event {
	var l line
	if evs, ok := agents.DecodeJSONLine(raw, &l); !ok {
		return evs
	}
	switch l.Type {
	case "step_start":
		if !p.started {
			p.started = true
			return []agents.Event{{Kind: agents.KindStart, Text: l.SessionID}}
		}
	case "text":
		if l.Part.Text != "" {
			p.last = l.Part.Text
			return []agents.Event{{Kind: agents.KindMessage, Text: l.Part.Text}}
		}
	case "tool_use":
		st := l.Part.State
		evs := []agents.Event{{Kind: agents.KindToolCall, Tool: l.Part.Tool, ToolID: l.Part.CallID, Input: st.Input}}
		switch st.Status {
		case "completed":
			evs = append(evs, agents.Event{Kind: agents.KindToolResult, ToolID: l.Part.CallID, Text: st.Output})
		case "error":
			evs = append(evs, agents.Event{Kind: agents.KindToolResult, ToolID: l.Part.CallID, Text: st.Error, IsError: true})
		}
		return evs
	case "step_finish":
		var u *agents.Usage
		if t := l.Part.Tokens; t != nil {
			u = &agents.Usage{InputTokens: t.Input, OutputTokens: t.Output + t.Reasoning, CachedTokens: t.Cache.Read}
		}
		evs := []agents.Event{{Kind: agents.KindLLMCall, Usage: u}}
		if l.Part.Reason == "stop" {
			evs = append(evs, agents.Event{Kind: agents.KindResult, Text: p.last})
		}
		return evs
	case "error":
		return []agents.Event{{Kind: agents.KindError, Text: errorText(l.Error)}}
	}
	return nil
}

func (p *parser) Close() []agents.Event { return nil }

// errorText reads opencode's error object ({"name", "data": {"message"}}).
func errorText(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return string(raw)
	}
	switch {
	case e.Data.Message != "":
		return e.Data.Message
	case e.Message != "":
		return e.Message
	}
	return e.Name
}
