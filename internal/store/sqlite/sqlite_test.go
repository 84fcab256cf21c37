package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

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

func TestConformanceInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(context.Background(), ":memory:")
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

// A read does not wait for a write in progress: it is answered from the
// last committed state. (With one connection for everything, the read
// below waited for the transaction it runs inside of: a deadlock.)
func TestReadsDuringWrite(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateSandbox(ctx, &store.Sandbox{ID: "sb", Image: "i", CPU: "1", Memory: "1Gi", Status: "pending", Runtime: "oci"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateSandbox(ctx, "sb", func(sb *store.Sandbox) error {
		sb.Status = "running"
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		during, err := s.GetSandbox(rctx, "sb")
		if err != nil {
			t.Errorf("read during a write: %v", err)
		} else if during.Status != "pending" {
			t.Errorf("read during a write saw %q, want the committed %q", during.Status, "pending")
		}
		if _, err := s.CountSandboxesByStatus(rctx); err != nil {
			t.Errorf("count during a write: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after, err := s.GetSandbox(ctx, "sb"); err != nil || after.Status != "running" {
		t.Errorf("read after the write = %+v, %v; want running", after, err)
	}
}

// The readers cannot write, whatever a bug might ask of them.
func TestReadersAreReadOnly(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.r.ExecContext(ctx, `DELETE FROM sandboxes`); err == nil {
		t.Error("a reader connection wrote to the database")
	}
}
