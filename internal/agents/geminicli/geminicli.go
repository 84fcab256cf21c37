// Package geminicli is the adapter of Gemini CLI (`gemini`): the Gemini
// API to the proxy (GOOGLE_GEMINI_BASE_URL, no /v1beta), settings and MCP
// servers in ~/.gemini/settings.json, stream-json output.
package geminicli

import (
	"encoding/json"
	"path"
	"strings"

	"github.com/agent2env/agent2env/internal/agents"
)

// Adapter is Gemini CLI's adapter. The zero value is ready.
type Adapter struct{}

var _ agents.Adapter = Adapter{}

// Name implements agents.Adapter.
func (Adapter) Name() string { return "gemini-cli" }

// Plan implements agents.Adapter.
func (Adapter) Plan(in agents.Input) (*agents.Plan, error) {
	env := agents.Env(in)
	env["GEMINI_MODEL"] = in.Model
	env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
	settings := map[string]any{
		// The environment alone is not enough: without an auth type in
		// the settings gemini exits 41.
		"security": map[string]any{
			"auth":        map[string]any{"selectedType": "gemini-api-key"},
			"folderTrust": map[string]any{"enabled": false},
		},
		"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
	}
	if len(in.MCP) > 0 {
		settings["mcpServers"] = agents.SettingsServers(in.MCP)
	}
	f, err := agents.JSONFile(path.Join(agents.Home(in), ".gemini", "settings.json"), settings)
	if err != nil {
		return nil, err
	}
	cmd := []string{"gemini", "-p", agents.Prompt(in.Goal), "--yolo", "--skip-trust", "-o", "stream-json", "-m", in.Model}
	return &agents.Plan{Files: []agents.File{f}, Command: cmd, Env: env, Dir: in.Workdir}, nil
}

// NewParser implements agents.Adapter.
func (Adapter) NewParser() agents.Parser { return &parser{} }

// parser reads gemini's stream-json: init, message (assistant text in
// deltas, joined here into one message), tool_use, tool_result, error and
// result with the run's stats.
type parser struct {
	text strings.Builder // assistant deltas not yet given out
	last string          // the last assistant message, the run's answer
}

type line struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"session_id"`
	Model      string          `json:"model"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	Delta      bool            `json:"delta"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Message    string          `json:"message"`
	Error      json.RawMessage `json:"error"`
	Stats      *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		Cached       int64 `json:"cached"`
	} `json:"stats"`
}

func (p *parser) Line(raw []byte) []agents.Event {
	var l line
	if evs, ok := agents.DecodeJSONLine(raw, &l); !ok {
		return append(p.flush(), evs...)
	}
	if l.Type == "message" && l.Role == "assistant" {
		p.text.WriteString(l.Content)
		if !l.Delta {
			return p.flush()
		}
		return nil
	}
	evs := p.flush()
	switch l.Type {
	case "init":
		evs = append(evs, agents.Event{Kind: agents.KindStart, Text: strings.TrimSpace(l.SessionID + " " + l.Model)})
	case "tool_use":
		evs = append(evs, agents.Event{Kind: agents.KindToolCall, Tool: l.ToolName, ToolID: l.ToolID, Input: l.Parameters})
	case "tool_result":
		text := l.Output
		if text == "" && len(l.Error) > 0 {
			text = errorText(l.Error)
		}
		evs = append(evs, agents.Event{Kind: agents.KindToolResult, ToolID: l.ToolID, Text: text, IsError: l.Status == "error"})
	case "error":
		evs = append(evs, agents.Event{Kind: agents.KindError, Text: firstNonEmpty(l.Message, errorText(l.Error))})
	case "result":
		ev := agents.Event{Kind: agents.KindResult, IsError: l.Status != "success", Text: errorText(l.Error)}
		if !ev.IsError {
			ev.Text = p.last
		}
		if l.Stats != nil {
			ev.Usage = &agents.Usage{InputTokens: l.Stats.InputTokens, OutputTokens: l.Stats.OutputTokens, CachedTokens: l.Stats.Cached}
		}
		evs = append(evs, ev)
	}
	return evs
}

func (p *parser) flush() []agents.Event {
	if p.text.Len() == 0 {
		return nil
	}
	ev := agents.Event{Kind: agents.KindMessage, Text: p.text.String()}
	p.last = ev.Text
	p.text.Reset()
	return []agents.Event{ev}
}

func (p *parser) Close() []agents.Event { return p.flush() }

// errorText reads an error that is a string or an object with a message.
func errorText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	return string(raw)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
