package daemon

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/store"
)

// The LLM archive of two daemons on one PostgreSQL store: an exchange
// proxied by either is read, with its bodies, through the other's API,
// also once the daemon that proxied it is gone with its files; one
// daemon's retention removes both daemons' exchanges past the limit.
func TestLLMArchiveAcrossDaemons(t *testing.T) {
	ctx := context.Background()
	up := llmtest.NewFakeUpstream(t, proxy.Codecs[llm.FormatOpenAI], "", func(r *llm.Request) (*llm.Response, *llm.Error) {
		return &llm.Response{ID: "r", Model: "m", Content: []llm.Part{llm.Text("answer " + strings.Repeat("x", 3000))},
			StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 3, OutputTokens: 2}}, nil
	})
	path := filepath.Join(t.TempDir(), "llm.yaml")
	writeLLMConfig(t, path, up.URL)
	const maxAge = 4 * time.Second
	ds := startShared(t, func(cfg *Config) {
		cfg.LLMConfig = path
		cfg.LLMArchive.MaxAge = maxAge
	})
	began := time.Now()
	for i, d := range ds {
		if code, body := llmCall(t, d.addr, "", i == 1); code != http.StatusOK {
			t.Fatalf("call on daemon %d: %d %s", i, code, body)
		}
		if err := d.sys.LLMArchive.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l, err := ds[0].api.LLM().List(ctx, client.LLMFilter{})
	if err != nil || len(l.Items) != 2 {
		t.Fatalf("exchanges listed: %+v, %v; want both daemons' two", l, err)
	}
	ids := [2]string{l.Items[0].ID, l.Items[1].ID} // oldest first: daemon 0's, then 1's
	read := func(d *testDaemon, id string) (*api.LLMExchangeDetail, error) {
		t.Helper()
		x, err := d.api.LLM().Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if x.Request == nil || !strings.Contains(string(x.Request.Body), `"hi"`) || x.Response == nil ||
			int64(len(x.Response.Body)) != x.ResponseBytes || x.ResponseBytes < 3000 || x.UpstreamResponse == nil {
			t.Errorf("exchange %s read on another daemon: %+v; want its request and both responses", id, x)
		}
		return x, nil
	}
	for i := range ds {
		if _, err := read(ds[1-i], ids[i]); err != nil {
			t.Errorf("exchange of daemon %d read on daemon %d: %v", i, 1-i, err)
		}
	}
	// Daemon 0 stops and its files go, as a replaced Pod's: its exchange
	// is still read on daemon 1.
	if err := ds[0].stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ds[0].sys.cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	if _, err := read(ds[1], ids[0]); err != nil {
		t.Errorf("exchange of a daemon gone, with its files: %v", err)
	}
	if time.Since(began) >= maxAge {
		t.Fatalf("the reads took %v, past the retention of %v the test then checks", time.Since(began), maxAge)
	}

	time.Sleep(time.Until(began.Add(maxAge + 500*time.Millisecond)))
	if err := ds[1].sys.LLMArchive.SweepShared(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if _, err := ds[1].api.LLM().Get(ctx, id); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("daemon %d's exchange after the retention: %v; want not found", i, err)
		}
		if _, err := ds[1].sys.Store.(store.LLMBodies).LLMBody(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("daemon %d's exchange's records after the retention: %v; want not found", i, err)
		}
	}
}
