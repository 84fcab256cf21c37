package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/store"
)

// BenchmarkCreateBurst is the store's share of 100 concurrent creates:
// each stores its record with its event, then its status with its event.
func BenchmarkCreateBurst(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for j := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("s%d-%d", i, j)
				now := time.Now().UTC()
				sb := &store.Sandbox{ID: id, Image: "agent2env/python", Status: "pending", CreatedAt: now, UpdatedAt: now}
				if err := s.CreateSandboxLimited(ctx, sb, 10000, store.Event{At: now, Status: "pending", Message: "created"}); err != nil {
					b.Error(err)
					return
				}
				if _, err := s.UpdateSandbox(ctx, id, func(sb *store.Sandbox) error { sb.Status = "running"; return nil },
					store.Event{At: now, Status: "running", Message: "started"}); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		for j := range 100 {
			if err := s.DeleteSandbox(ctx, fmt.Sprintf("s%d-%d", i, j)); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
}
