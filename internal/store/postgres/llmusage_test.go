package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/store"
)

// The limits' counts (store.LLMUsage) added by two stores (daemons) sum
// per scope and second and in all; a read selects its scopes and the
// seconds after since; seconds past keeping go at the next add.
func TestLLMUsage(t *testing.T) {
	ctx := context.Background()
	ss := twoStores(t)
	now := time.Now().Unix()
	adds := [2][]store.LLMUsageCount{
		{{Scope: "key/k", Sec: now, Requests: 2, Tokens: 10}, {Scope: "run/r", Sec: now - 1, Requests: 1, Tokens: 5},
			{Scope: "key/k", Sec: now - llmUsageSeconds - 10, Requests: 1, Tokens: 1}},
		{{Scope: "key/k", Sec: now, Requests: 1, Tokens: 7}, {Scope: "sandbox/s", Sec: now, Requests: 1}},
	}
	for i, a := range adds {
		if err := ss[i].AddLLMUsage(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	counts, totals, err := ss[0].LLMUsageOf(ctx, []string{"key/k", "run/r"}, now-60)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(counts, func(a, b store.LLMUsageCount) int { return int(a.Sec - b.Sec) })
	want := []store.LLMUsageCount{{Scope: "run/r", Sec: now - 1, Requests: 1, Tokens: 5}, {Scope: "key/k", Sec: now, Requests: 3, Tokens: 17}}
	if !slices.Equal(counts, want) {
		t.Errorf("counts: %+v; want %+v", counts, want)
	}
	if old, _, err := ss[0].LLMUsageOf(ctx, []string{"key/k"}, now-2*llmUsageSeconds); err != nil || len(old) != 1 {
		t.Errorf("counts of key/k since long ago: %+v, %v; want this second's only (the old one deleted)", old, err)
	}
	if totals["key/k"] != 18 || totals["run/r"] != 5 || len(totals) != 2 {
		t.Errorf("totals: %v; want key/k 18 (the old second's token too), run/r 5", totals)
	}
}
