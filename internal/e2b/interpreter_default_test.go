package e2b

import (
	"strings"
	"testing"
)

// TestDefaultContextRemembered: runs without a context use one default
// context, remembered; once it is deleted, the next run makes a new one.
func TestDefaultContextRemembered(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	run := func() {
		t.Helper()
		if code, body := e.in(t, "sba", InterpreterPort, "POST", "/execute", `{"code":"x"}`); code != 200 || !strings.Contains(body, "end_of_execution") {
			t.Fatalf("execute: %d %s", code, body)
		}
	}
	run()
	run()
	if len(e.ctx.streams) != 2 || e.ctx.streams[0] != e.ctx.streams[1] {
		t.Fatalf("runs went to %v, want one default context twice", e.ctx.streams)
	}
	first := strings.TrimPrefix(e.ctx.streams[0], "sba/")
	if code, _ := e.in(t, "sba", InterpreterPort, "DELETE", "/contexts/"+first, ""); code != 200 {
		t.Fatalf("delete the default context: %d", code)
	}
	run()
	if got := e.ctx.streams[2]; got == e.ctx.streams[0] || !strings.HasPrefix(got, "sba/") {
		t.Errorf("the run after the delete went to %s, want a new default context", got)
	}
}
