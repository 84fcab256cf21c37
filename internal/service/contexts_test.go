package service

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// The kernels of these tests are the host's bash, run by the fake
// runtime's agents.

func newContexts(t *testing.T, e *env) *Contexts {
	t.Helper()
	return NewContexts(contexts.New(contexts.Config{ReadyTimeout: 10 * time.Second}, e.m, e.st, nil, slog.New(slog.DiscardHandler)))
}

// Every operation keeps to the sandbox it is given, and "" means any.
func TestContextScope(t *testing.T) {
	e := newEnv(t, "")
	c := newContexts(t, e)
	ctx := context.Background()
	a, b := e.running(t).ID, e.running(t).ID
	bash := api.CreateContextRequest{Language: api.LanguageBash}

	create := func(sandboxID, reqSandbox string) (*api.Context, error) {
		req := bash
		req.SandboxID = reqSandbox
		return c.Create(ctx, sandboxID, req)
	}
	inA, err := create(a, "")
	if err != nil {
		t.Fatal(err)
	}
	alsoInA, err := create(a, a) // the body may repeat the path's sandbox
	if err != nil {
		t.Fatal(err)
	}
	inB, err := create("", b)
	if err != nil {
		t.Fatal(err)
	}
	if inA.SandboxID != a || alsoInA.SandboxID != a || inB.SandboxID != b {
		t.Fatalf("contexts in %s, %s, %s; want %s, %s, %s", inA.SandboxID, alsoInA.SandboxID, inB.SandboxID, a, a, b)
	}
	_, err = create(a, b)
	checkErr(t, err, errdefs.ErrInvalidArgument, "")

	lists := []struct {
		sandbox string
		want    []string
	}{
		{a, []string{inA.ContextID, alsoInA.ContextID}},
		{b, []string{inB.ContextID}},
		{"", []string{inA.ContextID, alsoInA.ContextID, inB.ContextID}},
	}
	for _, l := range lists {
		got, err := c.List(ctx, l.sandbox, "")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range got.Items {
			ids = append(ids, x.ContextID)
		}
		if diff := cmp.Diff(l.want, ids); diff != "" || got.Total != len(l.want) || !cmp.Equal(got.Items, got.Contexts) {
			t.Errorf("List in %q: total %d, contexts %v (-want +got ids):\n%s", l.sandbox, got.Total, got.Contexts, diff)
		}
	}
	_, err = c.List(ctx, "nosuch", "")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)

	// Another sandbox's context is not found there.
	for _, sandboxID := range []string{b, "nosuch"} {
		_, err = c.Get(ctx, sandboxID, inA.ContextID)
		checkErr(t, err, errdefs.ErrNotFound, "")
		_, err = c.Execute(ctx, sandboxID, inA.ContextID, api.ExecuteRequest{Code: "echo no"})
		checkErr(t, err, errdefs.ErrNotFound, "")
		_, err = c.Stream(ctx, sandboxID, inA.ContextID, api.ExecuteRequest{Code: "echo no"})
		checkErr(t, err, errdefs.ErrNotFound, "")
		_, err = c.Delete(ctx, sandboxID, inA.ContextID)
		checkErr(t, err, errdefs.ErrNotFound, "")
	}
	for _, sandboxID := range []string{a, ""} {
		got, err := c.Get(ctx, sandboxID, inA.ContextID)
		if err != nil || got.ContextID != inA.ContextID {
			t.Errorf("Get in %q = %+v, %v", sandboxID, got, err)
		}
		res, err := c.Execute(ctx, sandboxID, inA.ContextID, api.ExecuteRequest{Code: "echo hi"})
		if err != nil || res.Output.Stdout != "hi\n" || !res.Success {
			t.Fatalf("Execute in %q = %+v, %v", sandboxID, res, err)
		}
		res.Release()
	}

	del, err := c.Delete(ctx, a, inA.ContextID)
	if err != nil {
		t.Fatal(err)
	}
	want := &api.DeleteContextResponse{ContextID: inA.ContextID, Status: "deleted", Message: "context deleted"}
	if diff := cmp.Diff(want, del); diff != "" {
		t.Errorf("delete response (-want +got):\n%s", diff)
	}
	_, err = c.Delete(ctx, "", inA.ContextID)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeContextNotFound)
}

// A sandbox's default context of a language is made once, however many
// ask at once, and is its own per sandbox, language and name.
func TestContextDefault(t *testing.T) {
	e := newEnv(t, "")
	c := newContexts(t, e)
	ctx := context.Background()
	a, b := e.running(t).ID, e.running(t).ID

	ids := make(chan string, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Default(ctx, a, api.CreateContextRequest{Language: "sh", Name: "surface-default"}) // an alias of bash
			if err != nil {
				t.Error(err)
				return
			}
			ids <- got.ContextID
		}()
	}
	wg.Wait()
	close(ids)
	first := ""
	for id := range ids {
		if first == "" {
			first = id
		} else if id != first {
			t.Errorf("concurrent first calls made %s and %s", first, id)
		}
	}
	got, err := c.Get(ctx, a, first)
	if err != nil || got.Language != api.LanguageBash || got.Name != "surface-default" {
		t.Fatalf("the default context = %+v, %v", got, err)
	}
	for _, other := range []struct{ sandbox, name string }{{b, "surface-default"}, {a, "another-default"}} {
		o, err := c.Default(ctx, other.sandbox, api.CreateContextRequest{Language: api.LanguageBash, Name: other.name})
		if err != nil || o.ContextID == first {
			t.Errorf("Default(%s, %s) = %+v, %v; want a context of its own", other.sandbox, other.name, o, err)
		}
	}
	_, err = c.Default(ctx, a, api.CreateContextRequest{Language: "cobol", Name: "surface-default"})
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
}

func TestStderrWithError(t *testing.T) {
	tb := "Traceback (most recent call last):\nZeroDivisionError: division by zero"
	for _, tt := range []struct {
		name, stderr string
		err          *api.ExecutionError
		want         string
	}{
		{"no error", "warn\n", nil, "warn\n"},
		{"traceback", "", &api.ExecutionError{Name: "ZeroDivisionError", Value: "division by zero", Traceback: tb}, tb + "\n"},
		{"after the code's own, on a line of its own", "warn", &api.ExecutionError{Traceback: tb}, "warn\n" + tb + "\n"},
		{"already there", "x\n" + tb + "\n", &api.ExecutionError{Traceback: tb}, "x\n" + tb + "\n"},
		{"no traceback", "", &api.ExecutionError{Name: "TimeoutError", Value: "execution exceeded the timeout"},
			"TimeoutError: execution exceeded the timeout\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := StderrWithError(tt.stderr, tt.err); got != tt.want {
				t.Errorf("StderrWithError(%q, %+v) = %q, want %q", tt.stderr, tt.err, got, tt.want)
			}
		})
	}
}
