package manager

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/netguard"
)

// A template file source is fetched by the daemon: one on the daemon's
// own host (here its loopback, standing for the daemon's API or a cloud
// metadata service) must not be, or its answer lands in the sandbox.
func TestTemplateSourceOnHostRefused(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"items":[{"accessToken":"secret"}]}`)
	}))
	defer srv.Close()
	e := templateEnv(t, fakeTemplates{"t": {Image: "alpine",
		Files: []api.FileSpec{{Destination: "/workspace/loot.json", Source: srv.URL + "/api/v1/sandboxes"}}}})
	sb := e.create(t, CreateRequest{Template: "t"})
	got := e.waitStatus(t, sb.ID, api.StatusFailed)
	if !strings.Contains(got.Reason, "loopback") {
		t.Errorf("reason = %q, want it to name the loopback address", got.Reason)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the daemon fetched the internal source %d times", n)
	}
}

// An operator's allow-list lets a source on an internal mirror through.
func TestTemplateSourceAllowListed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "from the mirror")
	}))
	defer srv.Close()
	e := templateEnv(t, fakeTemplates{"t": {Image: "alpine",
		Files: []api.FileSpec{{Destination: "/workspace/conf.txt", Source: srv.URL + "/conf.txt"}}}})
	g, err := netguard.New(netguard.Config{Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	e.m.fetcher = netguard.NewFetcher(netguard.FetchConfig{Guard: g})
	sb := e.create(t, CreateRequest{Template: "t"})
	e.waitStatus(t, sb.ID, api.StatusRunning)
	dir, err := e.rt.WorkDir(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "conf.txt")); err != nil || string(b) != "from the mirror" {
		t.Errorf("conf.txt = %q, %v", b, err)
	}
}
