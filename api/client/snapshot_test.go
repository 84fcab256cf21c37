package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// TestSnapshots checks the requests of the snapshot calls: method, path,
// query and body.
func TestSnapshots(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/api/v1/snapshots":
			json.NewEncoder(w).Encode(api.SnapshotList{Items: []api.Snapshot{{ID: "snap-1"}}, NextCursor: r.URL.Query().Get("limit")})
		case r.URL.Path == "/api/v1/sandboxes":
			io.WriteString(w, `{"id":"new","contexts":{"ctx-a":"ctx-c"}}`)
		case strings.HasSuffix(r.URL.Path, "/fork"):
			json.NewEncoder(w).Encode(api.ForkResponse{SnapshotID: "snap-1", Sandboxes: []api.ForkedSandbox{
				{Sandbox: api.Sandbox{ID: "f1"}, Contexts: map[string]string{"ctx-a": "ctx-b"}}}})
		default:
			json.NewEncoder(w).Encode(api.Snapshot{ID: "snap-1", SandboxID: "sb"})
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := c.Snapshots()
	if snap, err := s.Create(ctx, "sb", true); err != nil || snap.ID != "snap-1" {
		t.Errorf("Create = %+v, %v", snap, err)
	}
	if list, err := s.List(ctx, "sb"); err != nil || len(list) != 1 {
		t.Errorf("List = %+v, %v", list, err)
	}
	if l, err := s.ListPage(ctx, client.ListSnapshotsOptions{SandboxID: "sb", Limit: 1, Cursor: "c1", Order: api.OrderAsc}); err != nil ||
		len(l.Items) != 1 || l.NextCursor != "1" {
		t.Errorf("ListPage = %+v, %v", l, err)
	}
	if _, err := s.Get(ctx, "snap-1"); err != nil {
		t.Error(err)
	}
	if err := s.Delete(ctx, "snap-1"); err != nil {
		t.Error(err)
	}
	ttl := 60
	if sb, err := s.Restore(ctx, "snap-1", &ttl, nil); err != nil || sb.ID != "new" || sb.Contexts["ctx-a"] != "ctx-c" {
		t.Errorf("Restore = %+v, %v", sb, err)
	}
	if res, err := s.ForkSandbox(ctx, "sb", api.ForkRequest{Count: 2, TTL: &ttl}); err != nil || res.SnapshotID != "snap-1" ||
		len(res.Sandboxes) != 1 || res.Sandboxes[0].ID != "f1" || res.Sandboxes[0].Contexts["ctx-a"] != "ctx-b" {
		t.Errorf("ForkSandbox = %+v, %v", res, err)
	}
	if res, err := s.Fork(ctx, "snap-1", api.ForkRequest{Count: 1}); err != nil || len(res.Sandboxes) != 1 {
		t.Errorf("Fork = %+v, %v", res, err)
	}
	if _, err := s.Get(ctx, ""); err == nil {
		t.Error("Get of an empty id: no error")
	}
	want := []string{
		`POST /api/v1/sandboxes/sb/snapshots {"stop":true}`,
		"GET /api/v1/snapshots?sandbox_id=sb ",
		"GET /api/v1/snapshots?cursor=c1&limit=1&order=asc&sandbox_id=sb ",
		"GET /api/v1/snapshots/snap-1 ",
		"DELETE /api/v1/snapshots/snap-1 ",
		`POST /api/v1/sandboxes {"ttl":60,"from_snapshot":"snap-1"}`,
		`POST /api/v1/sandboxes/sb/fork {"count":2,"ttl":60}`,
		`POST /api/v1/snapshots/snap-1/fork {"count":1}`,
	}
	if len(got) != len(want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %q, want %q", i, got[i], want[i])
		}
	}
}
