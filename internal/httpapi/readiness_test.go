package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// /readyz answers 503 naming each dependency that fails or does not
// answer in time, and 200 once all answer again.
func TestReadyChecks(t *testing.T) {
	var storeDown, clusterSlow atomic.Bool
	store := ReadyCheck{Name: "store", Check: func(context.Context) error {
		if storeDown.Load() {
			return errors.New("connection refused")
		}
		return nil
	}}
	cluster := ReadyCheck{Name: "cluster", Check: func(ctx context.Context) error {
		if !clusterSlow.Load() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			return nil
		}
	}}
	e := newEnv(t, envOptions{opts: []Option{WithReadyChecks(store, cluster)}})
	for _, tc := range []struct {
		name                     string
		storeDown, clusterSlow   bool
		status                   int
		mentions, doesNotMention []string
	}{
		{"all answer", false, false, http.StatusOK, []string{"ready"}, nil},
		{"store down", true, false, http.StatusServiceUnavailable, []string{"store: connection refused"}, []string{"cluster"}},
		{"cluster too slow", false, true, http.StatusServiceUnavailable, []string{"cluster: context deadline exceeded"}, []string{"store"}},
		{"both", true, true, http.StatusServiceUnavailable, []string{"store: connection refused", "cluster: context deadline exceeded"}, nil},
		{"back", false, false, http.StatusOK, []string{"ready"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storeDown.Store(tc.storeDown)
			clusterSlow.Store(tc.clusterSlow)
			start := time.Now()
			resp := e.do(t, http.MethodGet, "/readyz", "", nil)
			if took := time.Since(start); took > readyTimeout+time.Second {
				t.Errorf("took %v: the checks are bounded by %v", took, readyTimeout)
			}
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.status != http.StatusOK {
				checkError(t, resp, tc.status, api.CodeUnavailable)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(string(resp.body), m) {
					t.Errorf("body %s does not say %q", resp.body, m)
				}
			}
			for _, m := range tc.doesNotMention {
				if strings.Contains(string(resp.body), m) {
					t.Errorf("body %s blames %q, which answered", resp.body, m)
				}
			}
		})
	}
	// Not recovered yet: 503 whatever the checks say.
	e.srv.SetReady(false)
	checkError(t, e.do(t, http.MethodGet, "/readyz", "", nil), http.StatusServiceUnavailable, api.CodeUnavailable)
}
