package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// mcpFlood is run by python3 in a sandbox: it asks the daemon's MCP
// server at 127.0.0.1:4000 for 20 large sessions and 100 contexts, as
// hostile code would, and prints what came back of each kind: the number
// made and the codes of the refusals.
const mcpFlood = `import collections, json, urllib.request
def call(i, name, args):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}).encode()
    req = urllib.request.Request("http://127.0.0.1:4000/mcp", data=body, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(req, timeout=120) as r:
        raw = r.read().decode()
    if "text/event-stream" in r.headers.get("Content-Type", ""):
        raw = [l[5:] for l in raw.splitlines() if l.startswith("data:")][-1]
    res = json.loads(raw)["result"]
    if not res.get("isError"):
        return "made"
    return json.loads(res["content"][0]["text"]).get("code", "?")
out = {"sessions": collections.Counter(), "contexts": collections.Counter()}
for i in range(20):
    out["sessions"][call(i, "execute_code", {"code": "1", "session_id": "big-%d" % i, "flavor": "large"})] += 1
out["small"] = call(100, "execute_code", {"code": "1", "session_id": "small"})
for i in range(100):
    out["contexts"][call(200 + i, "create_context", {"name": "c%d" % i})] += 1
print(json.dumps(out))
`

// TestSandboxCannotExhaustHost: code in a 1-CPU, 512Mi sandbox that asks
// its MCP server for 20 large sessions and 100 contexts gets what its own
// size allows (one small session) and RESOURCE_LIMIT past it; the host's
// capacity for others is untouched (a 16-CPU create still fits where the
// 20 large sessions would have taken 80), the API lists what the sandbox
// made, and all of it goes when the sandbox is deleted.
func TestSandboxCannotExhaustHost(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python", CPU: "1", Memory: "512Mi"})
	var res api.ExecResponse
	if code := d.do("POST", "/api/v1/sandboxes/"+sb.ID+"/exec",
		api.ExecRequest{Command: []string{"python3", "-c", mcpFlood}, Timeout: 900}, &res); code != http.StatusOK || res.ExitCode != 0 {
		t.Fatalf("the flood: status %d, %+v", code, res)
	}
	var got struct {
		Sessions, Contexts map[string]int
		Small              string
	}
	if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
		t.Fatalf("the flood printed %q: %v", res.Stdout, err)
	}
	if got.Sessions[api.CodeLimitExceeded] != 20 || got.Small != "made" || got.Contexts[api.CodeLimitExceeded] != 100 {
		t.Fatalf("the flood: %+v; want every large session and every context refused with %s, the small session made",
			got, api.CodeLimitExceeded)
	}
	var sessions api.SessionList
	if code := d.do("GET", "/api/v1/sessions", nil, &sessions); code != http.StatusOK || len(sessions.Items) != 1 ||
		sessions.Items[0].MadeBySandbox != sb.ID {
		t.Fatalf("the API's sessions: %d %+v; want the small one, made by %s", code, sessions, sb.ID)
	}
	var big api.Sandbox
	if code := d.do("POST", "/api/v1/sandboxes", api.CreateSandboxRequest{Image: "agent2env/python", CPU: "16", Memory: "16Gi"}, &big); code != http.StatusCreated {
		t.Fatalf("another tenant's 16-CPU create: status %d", code)
	}
	d.waitRunning(big.ID)
	for _, id := range []string{big.ID, sb.ID} {
		if code := d.do("DELETE", "/api/v1/sandboxes/"+id, nil, nil); code != http.StatusNoContent {
			t.Fatalf("delete %s: status %d", id, code)
		}
	}
	var left api.List[api.Sandbox]
	d.do("GET", "/api/v1/sandboxes", nil, &left)
	if code := d.do("GET", "/api/v1/sessions", nil, &sessions); code != http.StatusOK || len(sessions.Items) != 0 || len(left.Items) != 0 {
		t.Fatalf("after the sandbox's deletion: sessions %+v, sandboxes %+v; want none", sessions.Items, left.Items)
	}
	if strings.Contains(d.log.String(), "panic") {
		t.Error("the daemon panicked")
	}
	d.assertNoLeaks()
}
