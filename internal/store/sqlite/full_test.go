package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// A write the database has no room for (SQLITE_FULL, provoked with
// max_page_count as a full file system would) is 507 NO_SPACE, through the
// batched sandbox writes and the others alike.
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	sb := &store.Sandbox{ID: "sb1", Image: "alpine", Status: "running", CreatedAt: now, UpdatedAt: now}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `PRAGMA max_page_count = `+strconv.Itoa(pages)); err != nil {
		t.Fatal(err)
	}
	big := map[string]string{"BIG": strings.Repeat("x", 1<<20)}
	writes := map[string]func() error{
		"create sandbox": func() error {
			return s.CreateSandbox(ctx, &store.Sandbox{ID: "sb2", Image: "alpine", Env: big, CreatedAt: now, UpdatedAt: now})
		},
		"update sandbox": func() error {
			_, err := s.UpdateSandbox(ctx, "sb1", func(sb *store.Sandbox) error { sb.Env = big; return nil })
			return err
		},
		"create session": func() error {
			return s.CreateSession(ctx, &store.Session{Key: strings.Repeat("k", 1<<20), SandboxID: "sb1", CreatedAt: now, LastUsedAt: now})
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			err := write()
			if !errors.Is(err, errdefs.ErrResourceExhausted) || errdefs.Code(err) != api.CodeNoSpace {
				t.Errorf("error %v (code %q), want ErrResourceExhausted with %s", err, errdefs.Code(err), api.CodeNoSpace)
			}
		})
	}
}
