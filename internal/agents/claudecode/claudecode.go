// Package claudecode is the adapter of Claude Code (`claude`): Anthropic
// Messages to the proxy (ANTHROPIC_BASE_URL, no /v1), MCP servers in an
// --mcp-config file, stream-json output.
package claudecode

import (
	"path"

	"github.com/agent2env/agent2env/internal/agents"
)

// Adapter is Claude Code's adapter. The zero value is ready.
type Adapter struct{}

var _ agents.Adapter = Adapter{}

// Name implements agents.Adapter.
func (Adapter) Name() string { return "claude-code" }

type server struct {
	Type    string            `json:"type"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Plan implements agents.Adapter.
func (Adapter) Plan(in agents.Input) (*agents.Plan, error) {
	env := agents.Env(in)
	for k, v := range map[string]string{
		"ANTHROPIC_MODEL": in.Model,
		// Side calls (titles, summaries) go to the same model.
		"ANTHROPIC_SMALL_FAST_MODEL":    in.Model,
		"ANTHROPIC_DEFAULT_HAIKU_MODEL": in.Model,
		// Without it claude calls its vendor's API for telemetry despite
		// ANTHROPIC_BASE_URL; it also stops update checks and error reports.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
		// MCP tools in the tools list rather than behind ToolSearch.
		"ENABLE_TOOL_SEARCH": "false",
		// Auto-approval is refused as root without it; runs are meant to be
		// the sandbox user, but the sandbox is the isolation either way.
		"IS_SANDBOX": "1",
	} {
		env[k] = v
	}
	cmd := []string{"claude", "-p", agents.Prompt(in.Goal),
		"--dangerously-skip-permissions", "--output-format", "stream-json", "--verbose", "--model", in.Model}
	plan := &agents.Plan{Command: cmd, Env: env, Dir: in.Workdir}
	if len(in.MCP) > 0 {
		servers := map[string]server{}
		for _, s := range in.MCP {
			if s.Remote() {
				servers[s.Name] = server{Type: "http", URL: s.URL, Headers: s.Headers}
			} else {
				servers[s.Name] = server{Type: "stdio", Command: s.Command[0], Args: s.Command[1:], Env: s.Env}
			}
		}
		file := path.Join(agents.Home(in), ".agent2env", "claude-mcp.json")
		f, err := agents.JSONFile(file, map[string]any{"mcpServers": servers})
		if err != nil {
			return nil, err
		}
		plan.Files = append(plan.Files, f)
		plan.Command = append(plan.Command, "--mcp-config", file, "--strict-mcp-config")
	}
	return plan, nil
}

// NewParser implements agents.Adapter.
func (Adapter) NewParser() agents.Parser { return &agents.StreamJSON{} }
