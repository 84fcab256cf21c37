package manager

import (
	"context"
	"errors"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
)

func TestLookup(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	sb, _ := e.m.Get(ctx, id)

	token, running, err := e.m.Lookup(ctx, id)
	if err != nil || token != sb.AccessToken || len(token) != 64 || !running {
		t.Errorf("Lookup = %q, %v, %v; want the record's token, running", token, running, err)
	}
	if _, err := e.m.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, running, err := e.m.Lookup(ctx, id); err != nil || running {
		t.Errorf("Lookup of a stopped sandbox: running %v, %v", running, err)
	}
	if _, err := e.m.Dial(ctx, id, 8080); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Dial into a stopped sandbox: %v, want failed precondition", err)
	}
	if _, _, err := e.m.Lookup(ctx, "nosuch"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Lookup of an unknown sandbox: %v, want not found", err)
	}
	if _, err := e.m.Dial(ctx, "nosuch", 8080); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Dial into an unknown sandbox: %v, want not found", err)
	}
}
