package daemon

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// clusterRuntime is a runtime with a cluster behind it, which answers
// Ping while up is set, as the kubernetes runtime's does while its API
// server answers.
type clusterRuntime struct {
	*fakeruntime.Runtime
	up atomic.Bool
}

func (r *clusterRuntime) Ping(context.Context) error {
	if !r.up.Load() {
		return errors.New("connection refused")
	}
	return nil
}

// The daemon's /readyz follows its store and its runtime's cluster: 503
// naming what does not answer, 200 when both do.
func TestReadinessFollowsStoreAndCluster(t *testing.T) {
	rt := &clusterRuntime{Runtime: fakeruntime.New()}
	rt.up.Store(true)
	cfg := testConfig(t.TempDir(), rt.Runtime)
	cfg.runtime = rt
	d := start(t, cfg, nil)
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + d.addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("with store and cluster up: %d %s", code, body)
	}
	rt.up.Store(false)
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "cluster: connection refused") {
		t.Errorf("with the cluster down: %d %s", code, body)
	}
	rt.up.Store(true)
	if code, body := readyz(); code != http.StatusOK {
		t.Errorf("with the cluster back: %d %s", code, body)
	}
	// The store gone (closed under the daemon: its connections fail as a
	// lost server's would).
	if err := d.sys.Store.Close(); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "store: sqlite store") {
		t.Errorf("with the store closed: %d %s", code, body)
	}
}
