package e2e

import (
	"testing"

	"github.com/agent2env/agent2env/api"
)

// TestCodeInterpreterImage checks the default image of contexts: one
// session runs python (with numpy, pandas and matplotlib), javascript and
// bash side by side, sharing its files.
func TestCodeInterpreterImage(t *testing.T) {
	d := startDaemon(t, "")
	py := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "python", SessionName: "mixed"})
	res := d.execute("/api/v1/contexts/"+py.ContextID, "import numpy, pandas, matplotlib\n"+
		"open('/workspace/from-python', 'w').write(str(numpy.arange(3).sum()))\n"+
		"pandas.DataFrame({'a': [1, 2]})['a'].sum()", 120)
	if !res.Success || res.Result != "3" {
		t.Fatalf("python with numpy, pandas, matplotlib: %+v", res)
	}
	js := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "javascript", SessionName: "mixed"})
	sh := d.newContext("/api/v1/contexts", api.CreateContextRequest{Language: "bash", SessionName: "mixed"})
	if js.SandboxID != py.SandboxID || sh.SandboxID != py.SandboxID {
		t.Errorf("one session in sandboxes %s, %s, %s", py.SandboxID, js.SandboxID, sh.SandboxID)
	}
	if res := d.execute("/api/v1/contexts/"+js.ContextID, "require('fs').readFileSync('/workspace/from-python', 'utf8')", 0); res.Result != "'3'" {
		t.Errorf("javascript in the python session: %+v", res)
	}
	if res := d.execute("/api/v1/contexts/"+sh.ContextID, "cat /workspace/from-python", 0); res.Output.Stdout != "3" {
		t.Errorf("bash in the python session: %+v", res)
	}
	var sb api.Sandbox
	d.do("GET", "/api/v1/sandboxes/"+py.SandboxID, nil, &sb)
	if sb.Image != "agent2env/code-interpreter" {
		t.Errorf("the session's sandbox runs %q, want the code-interpreter image", sb.Image)
	}
	d.deleteAll()
	d.assertNoLeaks()
}
