package session

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// These are the contexts service's sessions (a context's session_name is
// a session), moved here from package contexts with the sessions.

// TestFailedCreateKeepsSession is the regression test of a defect: a
// context create that failed in an existing session (here the image has no
// interpreter for the language, or the directory is missing) deleted the
// session's sandbox, and with it the other contexts and their state. A
// failed request must change nothing that exists.
func TestFailedCreateKeepsSession(t *testing.T) {
	tests := []struct {
		name string
		req  api.CreateContextRequest
		code string
	}{
		{"no interpreter", api.CreateContextRequest{SessionName: "s1", Language: "javascript",
			Env: map[string]string{"PATH": "/nonexistent-a2e-test"}}, api.CodeLanguageMissing},
		{"missing directory", api.CreateContextRequest{SessionName: "s1", Language: "javascript",
			WorkingDir: "/nonexistent-a2e-test/dir"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			py := e.create(t, api.CreateContextRequest{SessionName: "s1", Language: "python"})
			e.exec(t, py.ContextID, "x = 5")
			_, err := e.ctxs.Create(bg, tt.req)
			checkErr(t, err, nil, tt.code)
			if !e.SandboxExists(t, py.SandboxID) {
				t.Fatal("the failed create deleted the session's sandbox")
			}
			if ids := e.Contexts(t); !reflect.DeepEqual(ids, []string{py.ContextID}) {
				t.Errorf("contexts %v, want only [%s]", ids, py.ContextID)
			}
			if r := e.exec(t, py.ContextID, "x"); r.Result != "5" || r.StateLost {
				t.Errorf("x after the failed create: %+v", r)
			}
		})
	}
}

// TestSessionMixesLanguages is the regression test of a defect: one
// session could not mix languages, since its sandbox came from the first
// language's image (agent2env/python has no node). The default image of
// every language now has every interpreter.
func TestSessionMixesLanguages(t *testing.T) {
	e := newEnv(t, func(su *setup) {
		su.images = contextstest.NewInterpreterImages(t, map[string][]string{
			"agent2env/python:latest":           {"python3", "bash"},
			"agent2env/node:latest":             {"node", "bash"},
			"agent2env/code-interpreter:latest": {"python3", "node", "bash"},
		})
	})
	py := e.create(t, api.CreateContextRequest{SessionName: "s1", Language: "python"})
	e.exec(t, py.ContextID, "open('from-python.txt', 'w').write('py')")
	js, err := e.ctxs.Create(bg, api.CreateContextRequest{SessionName: "s1", Language: "javascript"})
	if err != nil {
		t.Fatalf("javascript context in a python session: %v", err)
	}
	sh := e.create(t, api.CreateContextRequest{SessionName: "s1", Language: "bash"})
	if js.SandboxID != py.SandboxID || sh.SandboxID != py.SandboxID {
		t.Errorf("one session in sandboxes %s, %s, %s", py.SandboxID, js.SandboxID, sh.SandboxID)
	}
	if r := e.exec(t, js.ContextID, "require('fs').readFileSync('from-python.txt', 'utf8')"); r.Result != "'py'" {
		t.Errorf("javascript read %+v", r)
	}
	if r := e.exec(t, sh.ContextID, "cat from-python.txt"); r.Output.Stdout != "py" {
		t.Errorf("bash read %+v", r)
	}
}

func TestSession(t *testing.T) {
	e := newEnv(t)
	a := e.create(t, api.CreateContextRequest{SessionName: "s1"})
	b := e.create(t, api.CreateContextRequest{SessionName: "s1", Language: "py"})
	other := e.create(t, api.CreateContextRequest{SessionName: "s2"})
	if a.SandboxID != b.SandboxID {
		t.Errorf("one session, two sandboxes: %s, %s", a.SandboxID, b.SandboxID)
	}
	if other.SandboxID == a.SandboxID {
		t.Error("two sessions share a sandbox")
	}
	// The session owns the sandbox, not its contexts.
	if rec := e.record(t, "", "s1"); a.SessionName != "s1" || !rec.OwnsSandbox || rec.SandboxID != a.SandboxID ||
		e.Context(t, b.ContextID).OwnsSandbox || e.Context(t, b.ContextID).SessionKey != "/s1" {
		t.Errorf("context %+v, session %+v, context record %+v", a, rec, e.Context(t, b.ContextID))
	}
	// The session's contexts share files.
	e.exec(t, a.ContextID, "open('shared.txt', 'w').write('from a')")
	if r := e.exec(t, b.ContextID, "open('shared.txt').read()"); r.Result != "'from a'" {
		t.Errorf("b read %+v", r)
	}
	list, _, err := e.ctxs.List(bg, store.ContextFilter{SessionName: "s1"}, store.Page{})
	if err != nil || len(list) != 2 || list[0].ContextID != a.ContextID || list[1].ContextID != b.ContextID {
		t.Errorf("List session s1: %+v %v", list, err)
	}

	if err := e.ctxs.Delete(bg, a.ContextID); err != nil {
		t.Fatal(err)
	}
	if !e.SandboxExists(t, a.SandboxID) {
		t.Fatal("the session's sandbox went with its first context")
	}
	if ks := e.Kernels(t, a.SandboxID); !reflect.DeepEqual(ks, []string{b.ContextID}) {
		t.Errorf("kernels %v, want only [%s]", ks, b.ContextID)
	}
	if r := e.exec(t, b.ContextID, "1 + 1"); r.Result != "2" {
		t.Errorf("b after a went: %+v", r)
	}
	if err := e.ctxs.Delete(bg, b.ContextID); err != nil {
		t.Fatal(err)
	}
	if e.SandboxExists(t, a.SandboxID) {
		t.Error("the session's sandbox outlived its last context")
	}
	if !e.SandboxExists(t, other.SandboxID) {
		t.Error("another session's sandbox went")
	}
}

func TestSessionConcurrent(t *testing.T) {
	e := newEnv(t)
	const n = 4
	var wg sync.WaitGroup
	got := make([]*api.Context, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = e.ctxs.Create(bg, api.CreateContextRequest{SessionName: "s"})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if got[i].SandboxID != got[0].SandboxID {
			t.Errorf("context %d in sandbox %s, context 0 in %s", i, got[i].SandboxID, got[0].SandboxID)
		}
	}
	if ids := e.Sandboxes(t); len(ids) != 1 {
		t.Errorf("sandboxes %v, want one", ids)
	}
	if n := e.svc.locks.Len(); n != 0 {
		t.Errorf("%d session locks kept after the creates ended; want none", n)
	}
}

// TestSessionsConcurrent checks that one session's sandbox being made does
// not hold up another session's.
func TestSessionsConcurrent(t *testing.T) {
	e := newEnv(t)
	first, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.Rt.SetHooks(fakeruntime.Hooks{Create: func(ctx context.Context, spec *sandbox.Spec) error {
		held := false
		once.Do(func() { held = true })
		if held {
			close(first)
			<-release
		}
		return nil
	}})
	slow := make(chan error, 1)
	go func() {
		_, err := e.ctxs.Create(bg, api.CreateContextRequest{SessionName: "slow"})
		slow <- err
	}()
	<-first
	other := make(chan error, 1)
	go func() {
		_, err := e.ctxs.Create(bg, api.CreateContextRequest{SessionName: "other"})
		other <- err
	}()
	select {
	case err := <-other:
		if err != nil {
			t.Errorf("create in another session: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("a session waited for another session's sandbox")
	}
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("create in the slow session: %v", err)
	}
	if ids := e.Sandboxes(t); len(ids) != 2 {
		t.Errorf("sandboxes %v, want one per session", ids)
	}
}

// TestSessionLocksBounded checks that session names clients choose leave
// nothing behind once their contexts are gone, nor when creates fail (the
// service once kept a lock for every session name it was ever given).
func TestSessionLocksBounded(t *testing.T) {
	e := newEnv(t)
	for i := range 50 {
		_, err := e.ctxs.Create(bg, api.CreateContextRequest{SessionName: fmt.Sprintf("bogus-%d", i), SandboxID: "nosuch"})
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("create in an unknown sandbox: %v, want not found", err)
		}
	}
	sb := e.Sandbox(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, e.create(t, api.CreateContextRequest{SandboxID: sb.ID, SessionName: fmt.Sprintf("s%d", i)}).ContextID)
	}
	for _, id := range ids {
		if err := e.ctxs.Delete(bg, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.svc.locks.Len(); n != 0 {
		t.Errorf("%d session locks kept; want none", n)
	}
}

// A create that waits for its session gives up when its request does.
func TestSessionWaitCancelled(t *testing.T) {
	e := newEnv(t)
	unlock, err := e.svc.locks.LockContext(bg, store.SessionKey("", "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if _, err := e.ctxs.Create(ctx, api.CreateContextRequest{SessionName: "s"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("create while the session is busy past the deadline: %v, want deadline exceeded", err)
	}
	if ids := e.Sandboxes(t); len(ids) != 0 {
		t.Errorf("sandboxes %v made by a create that gave up", ids)
	}
}

func TestNamedSandbox(t *testing.T) {
	e := newEnv(t)
	sb := e.Sandbox(t)
	c := e.create(t, api.CreateContextRequest{SandboxID: sb.ID, Language: "python", SessionName: "s"})
	if rec := e.record(t, "", "s"); c.SandboxID != sb.ID || rec.OwnsSandbox || e.Context(t, c.ContextID).OwnsSandbox {
		t.Errorf("context %+v (session %+v): want it in %s, neither owning it", c, rec, sb.ID)
	}
	// A context of the same session joins it, without owning it either.
	d := e.create(t, api.CreateContextRequest{SessionName: "s"})
	if d.SandboxID != sb.ID || e.Context(t, d.ContextID).OwnsSandbox {
		t.Errorf("session peer %+v: want it in %s, not owning it", d, sb.ID)
	}
	got, err := e.ctxs.GetIn(bg, sb.ID, c.ContextID)
	if err != nil || got.ContextID != c.ContextID {
		t.Errorf("GetIn: %+v %v", got, err)
	}
	list, _, err := e.ctxs.List(bg, store.ContextFilter{SandboxID: sb.ID}, store.Page{})
	if err != nil || len(list) != 2 {
		t.Errorf("List in %s: %+v %v", sb.ID, list, err)
	}
	if err := e.ctxs.DeleteIn(bg, sb.ID, c.ContextID); err != nil {
		t.Fatal(err)
	}
	if err := e.ctxs.Delete(bg, d.ContextID); err != nil {
		t.Fatal(err)
	}
	if !e.SandboxExists(t, sb.ID) {
		t.Fatal("deleting contexts deleted the sandbox they were put in")
	}
	if ks := e.Kernels(t, sb.ID); len(ks) != 0 {
		t.Errorf("kernels left: %v", ks)
	}
}
