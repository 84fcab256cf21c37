package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// The bodies of a snapshot and a fork refuse a member they do not know
// (audit F7: {"stopp": true} took a live snapshot); a snapshot's may be
// left out or be empty, chunked too (audit F8).
func TestSnapshotForkBodies(t *testing.T) {
	var gotSnap api.CreateSnapshotRequest
	snapshot := snapshotHandler(func(_ context.Context, _ string, req api.CreateSnapshotRequest) (*api.Snapshot, error) {
		gotSnap = req
		return &api.Snapshot{}, nil
	})
	fork := forkHandler(func(context.Context, string, api.ForkRequest) (*api.ForkResponse, error) {
		return &api.ForkResponse{}, nil
	})
	tests := []struct {
		name    string
		h       http.HandlerFunc
		body    string
		chunked bool
		want    int
		stop    bool
	}{
		{"snapshot, no body", snapshot, "", false, http.StatusCreated, false},
		{"snapshot, empty chunked body", snapshot, "", true, http.StatusCreated, false},
		{"snapshot, stop", snapshot, `{"stop":true}`, true, http.StatusCreated, true},
		{"snapshot, misspelt stop", snapshot, `{"stopp":true}`, false, http.StatusBadRequest, false},
		{"fork", fork, `{"count":1}`, false, http.StatusCreated, false},
		{"fork, unknown member", fork, `{"count":1,"foo":1}`, false, http.StatusBadRequest, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotSnap = api.CreateSnapshotRequest{}
			var body io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				body = io.MultiReader(body) // no length: sent chunked
			}
			req := httptest.NewRequest(http.MethodPost, "/", body)
			req.Header.Set("Content-Type", "application/json")
			if tt.chunked {
				req.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			tt.h(rec, req)
			if rec.Code != tt.want || gotSnap.Stop != tt.stop {
				t.Errorf("%d %s (stop %v), want %d (stop %v)", rec.Code, rec.Body, gotSnap.Stop, tt.want, tt.stop)
			}
		})
	}
}

// A snapshot, and the live snapshot a fork of a sandbox takes, fail with
// 503 when the sandbox cannot be saved as it is now (the agent still
// streams a command's output, CRIU could not save its processes): the
// document lists that status for both.
func TestSnapshotUnavailableDocumented(t *testing.T) {
	unavailable := errdefs.Unavailable("the agent still holds 1 connections from the daemon")
	doc := loadOpenAPI(t)
	for _, tt := range []struct {
		path string
		h    http.HandlerFunc
		body string
	}{
		{"/api/v1/sandboxes/{id}/snapshots", snapshotHandler(func(context.Context, string, api.CreateSnapshotRequest) (*api.Snapshot, error) {
			return nil, unavailable
		}), ""},
		{"/api/v1/sandboxes/{id}/fork", forkHandler(func(context.Context, string, api.ForkRequest) (*api.ForkResponse, error) {
			return nil, unavailable
		}), `{"count":1}`},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		tt.h(rec, req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("POST %s: %d %s, want 503", tt.path, rec.Code, rec.Body)
		}
		if doc.Paths.Value(tt.path).Post.Responses.Status(rec.Code) == nil {
			t.Errorf("POST %s answers %d, which api/openapi.yaml does not list", tt.path, rec.Code)
		}
	}
}

// GET /snapshots lists newest first, as it always did, or oldest first
// with order=asc, in pages of limit with next_cursor asking for the next;
// another order or limit, or a cursor the server did not give, is 400
// naming its parameter.
func TestListSnapshotsPages(t *testing.T) {
	e := newEnv(t, envOptions{})
	base := time.Now()
	oldest := []string{"snap-a", "snap-b", "snap-c"}
	for i, id := range oldest {
		snap := &store.Snapshot{ID: id, SandboxID: "sbx-1", Image: "alpine", Status: "ready", CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if err := e.st.CreateSnapshot(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	}
	newest := slices.Clone(oldest)
	slices.Reverse(newest)
	get := func(target string) (int, []byte) {
		resp := e.do(t, http.MethodGet, target, "", nil)
		return resp.status, resp.body
	}
	checkPages(t, "/api/v1/snapshots", []pageCase{
		{"", newest, 1}, {"?order=desc", newest, 1}, {"?order=asc", oldest, 1},
		{"?limit=2", newest, 2}, {"?limit=1&order=asc", oldest, 3}, {"?limit=3&sandbox_id=sbx-1", newest, 1},
	}, get, pageIDs(func(l *api.SnapshotList) ([]string, string) {
		var ids []string
		for _, s := range l.Items {
			ids = append(ids, s.ID)
		}
		return ids, l.NextCursor
	}))
}
