package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// TestLLMKeysCommands: create prints the secret once, ls lists the key
// without it, revoke revokes it, against the daemon's real key routes.
func TestLLMKeysCommands(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := gate.NewKeys(st)
	srv := httpapi.New(nil, nil, slog.New(slog.DiscardHandler), httpapi.WithRoutes(httpapi.NewLLMRoutes(keys)))
	srv.SetReady(true)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	t.Setenv(client.EnvURL, hs.URL)
	t.Setenv(client.EnvToken, "")

	code, out, errOut := run(t, "llm", "keys", "create", "--run", "run-7", "--sandbox", "sb-1", "--budget-tokens", "5000",
		"--requests-per-minute", "60", "--tokens-per-minute", "900", "--expires-in", "2h", "--name", "ci")
	secret := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(secret, gate.KeyPrefix) || strings.Count(out, "\n") != 1 {
		t.Fatalf("create: %d %q %q", code, out, errOut)
	}
	rec, err := keys.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatalf("the printed secret: %v", err)
	}
	if rec.Run != "run-7" || rec.Sandbox != "sb-1" || rec.BudgetTokens != 5000 || rec.RequestsPerMinute != 60 ||
		rec.TokensPerMinute != 900 || rec.Name != "ci" || rec.ExpiresAt.Sub(rec.CreatedAt) != 2*time.Hour {
		t.Errorf("key made %+v", rec)
	}

	code, out, _ = run(t, "llm", "keys", "create", "-o", "json")
	var k api.LLMKey
	if err := json.Unmarshal([]byte(out), &k); code != 0 || err != nil || !strings.HasPrefix(k.Key, gate.KeyPrefix) || k.ID == "" {
		t.Fatalf("create -o json: %d %q", code, out)
	}

	code, out, _ = run(t, "llm", "keys", "ls")
	if code != 0 || !strings.Contains(out, rec.ID) || !strings.Contains(out, "run-7") || !strings.Contains(out, "active") ||
		strings.Contains(out, gate.KeyPrefix) {
		t.Errorf("ls: %d %q", code, out)
	}
	code, out, _ = run(t, "llm", "keys", "ls", "-o", "json")
	var l api.LLMKeyList
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil || len(l.Items) != 2 || l.Items[0].ID != k.ID ||
		l.Items[1].Key != "" {
		t.Errorf("ls -o json: %d %q", code, out)
	}

	code, out, errOut = run(t, "llm", "keys", "revoke", rec.ID, "llmk_nope")
	if code != 1 || strings.TrimSpace(out) != rec.ID || !strings.Contains(errOut, "llmk_nope") {
		t.Errorf("revoke: %d %q %q", code, out, errOut)
	}
	if _, err := keys.Authenticate(context.Background(), secret); err == nil {
		t.Error("the revoked key still authenticates")
	}
	if code, out, _ := run(t, "llm", "keys", "ls", "-q"); code != 0 || !strings.Contains(out, rec.ID) {
		t.Errorf("ls -q: %d %q", code, out)
	}
	if code, out, _ := run(t, "llm", "keys", "ls"); !strings.Contains(out, "revoked") {
		t.Errorf("ls after revoke: %d %q", code, out)
	}

	for _, args := range [][]string{
		{"llm", "keys", "create", "--expires-in", "1500ms"}, {"llm", "keys", "create", "--budget-tokens", "x"},
		{"llm", "keys", "revoke"}, {"llm", "keys", "create", "extra"},
	} {
		if code, _, _ := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
	// The daemon's refusal (a negative budget) is an error, not usage.
	if code, _, errOut := run(t, "llm", "keys", "create", "--budget-tokens", "-1"); code != 1 || !strings.Contains(errOut, "negative") {
		t.Errorf("create --budget-tokens -1: %d %q", code, errOut)
	}
}
