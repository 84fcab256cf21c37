package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// TestListLLMKeysPages pages the LLM keys: newest first unless
// order=asc, limit and cursor as the other lists take them.
func TestListLLMKeysPages(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := New(nil, service.NewImages(newFakeImages()), slog.New(slog.DiscardHandler), WithRoutes(NewLLMRoutes(gate.NewKeys(st))))
	srv.SetReady(true)
	do := requester(t, srv.Handler())
	var oldest []string
	for _, name := range []string{"a", "b", "c"} {
		code, b := do(http.MethodPost, "/api/v1/llm/keys", `{"name":"`+name+`"}`)
		var k api.LLMKey
		if err := json.Unmarshal(b, &k); code != http.StatusCreated || err != nil {
			t.Fatalf("create key %s: %d %s", name, code, b)
		}
		oldest = append(oldest, k.ID)
		time.Sleep(time.Millisecond) // distinct created_at
	}
	newest := slices.Clone(oldest)
	slices.Reverse(newest)
	get := func(target string) (int, []byte) { return do(http.MethodGet, target, "") }
	checkPages(t, "/api/v1/llm/keys", []pageCase{
		{"", newest, 1}, {"?order=asc", oldest, 1}, {"?limit=2", newest, 2}, {"?limit=1&order=asc", oldest, 3},
	}, get, pageIDs(func(l *api.LLMKeyList) ([]string, string) {
		var ids []string
		for _, k := range l.Items {
			ids = append(ids, k.ID)
		}
		return ids, l.NextCursor
	}))
}
