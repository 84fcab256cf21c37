package contexts

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

func TestRestartIn(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.Sandbox(t), e.Sandbox(t)
	c := e.create(t, api.CreateContextRequest{SandboxID: a.ID, Env: map[string]string{"A2E_TEST": "kept"}})
	e.exec(t, c.ContextID, "x = 1", 0)
	if err := e.svc.RestartIn(bg, a.ID, c.ContextID); err != nil {
		t.Fatal(err)
	}
	// The same context, its state gone, its environment kept; the kernel
	// was started again by the restart, not by this execution.
	r := e.exec(t, c.ContextID, "import os\n('x' in globals(), os.environ.get('A2E_TEST'))", 0)
	if r.StateLost || r.Error != nil || r.Result != "(False, 'kept')" {
		t.Errorf("after the restart: %+v (error %+v), want x gone and the env kept", r, r.Error)
	}
	if ks := e.Kernels(t, a.ID); !reflect.DeepEqual(ks, []string{c.ContextID}) {
		t.Errorf("kernels %v, want [%s]", ks, c.ContextID)
	}
	checkErr(t, e.svc.RestartIn(bg, b.ID, c.ContextID), errdefs.ErrNotFound, api.CodeContextNotFound)
	checkErr(t, e.svc.RestartIn(bg, a.ID, "ctx-nosuch"), errdefs.ErrNotFound, api.CodeContextNotFound)
	checkErr(t, e.svc.RestartIn(bg, "nosuchsandbox", c.ContextID), errdefs.ErrNotFound, api.CodeSandboxNotFound)
	if r := e.exec(t, c.ContextID, "x = 2\nx", 0); !strings.Contains(r.Result, "2") {
		t.Errorf("next execution: %+v", r)
	}
}
