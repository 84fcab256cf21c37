package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Reopening keeps records and does not re-run migrations.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSandbox(ctx, &store.Sandbox{ID: "keep", Image: "i", CPU: "1", Memory: "1Gi", Status: "running", Runtime: "oci"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.GetSandbox(ctx, "keep"); err != nil {
		t.Fatalf("record lost on reopen: %v", err)
	}
}
