// Package qwencode is the adapter of Qwen Code (`qwen`): Chat Completions
// to the proxy (OPENAI_BASE_URL with /v1), settings and MCP servers in
// ~/.qwen/settings.json, stream-json output in claude's shape.
package qwencode

import (
	"path"

	"github.com/agent2env/agent2env/internal/agents"
)

// Adapter is Qwen Code's adapter. The zero value is ready.
type Adapter struct{}

var _ agents.Adapter = Adapter{}

// Name implements agents.Adapter.
func (Adapter) Name() string { return "qwen-code" }

// Plan implements agents.Adapter.
func (Adapter) Plan(in agents.Input) (*agents.Plan, error) {
	env := agents.Env(in)
	env["OPENAI_MODEL"] = in.Model
	env["QWEN_CODE_SUPPRESS_YOLO_WARNING"] = "1"
	settings := map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "openai"}},
		"model":    map[string]any{"name": in.Model},
		"general":  map[string]any{"enableAutoUpdate": false},
		// Without these it reports usage to a RUM host.
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		// MCP tools in the tools list rather than behind tool_search.
		"tools": map[string]any{"toolSearch": map[string]any{"enabled": false}},
	}
	if len(in.MCP) > 0 {
		settings["mcpServers"] = agents.SettingsServers(in.MCP)
	}
	f, err := agents.JSONFile(path.Join(agents.Home(in), ".qwen", "settings.json"), settings)
	if err != nil {
		return nil, err
	}
	// The prompt comes first: an array option (--exclude-tools) would
	// swallow a positional after it.
	cmd := []string{"qwen", agents.Prompt(in.Goal), "--yolo", "--auth-type", "openai", "-o", "stream-json", "-m", in.Model}
	return &agents.Plan{Files: []agents.File{f}, Command: cmd, Env: env, Dir: in.Workdir}, nil
}

// NewParser implements agents.Adapter.
func (Adapter) NewParser() agents.Parser { return &agents.StreamJSON{} }
