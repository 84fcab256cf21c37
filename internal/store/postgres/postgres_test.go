package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/postgres/pgtest"
	"github.com/agent2env/agent2env/internal/store/storetest"
)

// server is the one PostgreSQL server of this package's tests.
var server pgtest.Shared

func TestMain(m *testing.M) {
	if url := os.Getenv(leaderChildEnv); url != "" {
		os.Exit(leaderChild(url))
	}
	os.Exit(server.Run(m))
}

// open opens a store on dbURL, closed when t ends.
func open(t *testing.T, dbURL string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Each test of the suite has a schema of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(context.Background(), server.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
