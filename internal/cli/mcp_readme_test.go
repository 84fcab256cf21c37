package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEMCPConfig holds the README's copy-pasteable MCP client
// configuration to what the binary does: valid JSON; the stdio entry runs
// the mcp command, with a variable it reads, pointed at serve's default
// address; the HTTP entry is streamable HTTP at that address's /mcp.
func TestREADMEMCPConfig(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(m[1], `"mcpServers"`) {
			block = m[1]
		}
	}
	if block == "" {
		t.Fatal("README.md has no JSON block with mcpServers")
	}
	type server struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
		Type    string            `json:"type"`
		URL     string            `json:"url"`
	}
	var cfg struct {
		MCPServers map[string]server `json:"mcpServers"`
	}
	dec := json.NewDecoder(strings.NewReader(block))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("the README's MCP configuration is not what clients read: %v\n%s", err, block)
	}
	const listen = "127.0.0.1:8080" // serve's default --listen
	stdio, http := cfg.MCPServers["agent2env"], cfg.MCPServers["agent2env-http"]
	if filepath.Base(stdio.Command) != "agent2env" || strings.Join(stdio.Args, " ") != "mcp" || stdio.Env["AGENT2ENV_URL"] != "http://"+listen {
		t.Errorf("stdio entry %+v: want agent2env mcp with AGENT2ENV_URL=http://%s", stdio, listen)
	}
	if code, out, stderr := run(t, "mcp", "--help"); code != 0 || !strings.Contains(out, "AGENT2ENV_URL") {
		t.Errorf("agent2env mcp --help: %d %s %s", code, out, stderr)
	}
	if http.Type != "streamable-http" || http.URL != "http://"+listen+"/mcp" {
		t.Errorf("HTTP entry %+v: want streamable-http at http://%s/mcp", http, listen)
	}
	if code, out, _ := run(t, "serve", "--help"); code != 0 || !strings.Contains(out, `"`+listen+`"`) {
		t.Errorf("serve's default --listen is not %s:\n%s", listen, out)
	}
}
