package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// The records of LLM exchanges (store.LLMBodies): stored by one daemon,
// read by another; those whose exchange is not indexed ended are found;
// the retention deletes by age and by total size, records and index.
func TestLLMBodies(t *testing.T) {
	ctx := context.Background()
	ss := twoStores(t)
	now := time.Now()
	put := func(id string, created time.Time, size int, state string) {
		t.Helper()
		if err := ss[0].PutLLMBody(ctx, id, created, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		if state != "" {
			x := &store.LLMExchange{ID: id, State: state, CreatedAt: created}
			if err := ss[0].PutLLMExchanges(ctx, []*store.LLMExchange{x}, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("old", now.Add(-time.Hour), 10, store.LLMComplete)
	put("a", now.Add(-3*time.Second), 100, store.LLMComplete)
	put("b", now.Add(-2*time.Second), 100, store.LLMInProgress) // its end not indexed
	put("c", now.Add(-time.Second), 100, "")                    // not indexed at all
	if b, err := ss[1].LLMBody(ctx, "a"); err != nil || len(b) != 100 {
		t.Errorf("records of a read through the other store: %d bytes, %v", len(b), err)
	}
	if _, err := ss[1].LLMBody(ctx, "none"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("records of an unknown exchange: %v; want not found", err)
	}
	if got, err := ss[1].UnindexedLLMBodies(ctx, time.Hour, 10); err != nil || len(got) != 0 {
		t.Errorf("unindexed stored more than an hour ago: %v, %v; want none", got, err)
	}
	time.Sleep(50 * time.Millisecond)
	got, err := ss[1].UnindexedLLMBodies(ctx, 10*time.Millisecond, 10)
	if err != nil || len(got) != 2 || got["b"] == nil || got["c"] == nil {
		t.Errorf("unindexed: %v, %v; want b and c", got, err)
	}

	// By age: old goes. By size (at most 250 bytes): a, the oldest left.
	if n, err := ss[1].DeleteLLMArchived(ctx, now.Add(-time.Minute), 250); err != nil || n != 2 {
		t.Errorf("retention deleted %d exchanges, %v; want old and a", n, err)
	}
	for id, kept := range map[string]bool{"old": false, "a": false, "b": true, "c": true} {
		_, err := ss[0].LLMBody(ctx, id)
		_, xerr := ss[0].GetLLMExchange(ctx, id)
		if kept != (err == nil) || !kept && !errors.Is(xerr, errdefs.ErrNotFound) {
			t.Errorf("%s after the retention: records %v, index %v; want kept %t", id, err, xerr, kept)
		}
	}
}
