package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// The fake's snapshots: Snapshot saves a running or paused sandbox,
// SnapshotPage lists newest first, cursors being indexes.

func (f *fakeSandboxes) Snapshot(_ context.Context, id string, req api.CreateSnapshotRequest) (*api.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.snapErr != nil {
		return nil, f.snapErr
	}
	sb, ok := f.byID[id]
	switch {
	case !ok:
		return nil, errdefs.NotFound("sandbox %s not found", id)
	case req.Stop:
		return nil, errdefs.Invalid("the fake takes live snapshots only")
	case sb.Status != api.StatusRunning && sb.Status != api.StatusPaused:
		return nil, errdefs.Conflict("sandbox %s is %s", id, sb.Status)
	}
	snap := api.Snapshot{ID: fmt.Sprintf("snap-aaaaaaaaaaa%c", 'a'+len(f.snaps)), SandboxID: id, Image: sb.Image, Status: api.SnapshotReady, CreatedAt: now}
	f.snaps = append(f.snaps, snap)
	return &snap, nil
}

func (f *fakeSandboxes) SnapshotPage(_ context.Context, sandboxID string, limit *int, cursor string, order api.Order) (*api.SnapshotList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if order != api.OrderDesc {
		return nil, errdefs.Invalid("the fake lists newest first")
	}
	var all []api.Snapshot
	for _, s := range slices.Backward(f.snaps) {
		if sandboxID == "" || s.SandboxID == sandboxID {
			all = append(all, s)
		}
	}
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 || n > len(all) {
			return nil, errdefs.Invalid("cursor %q: not one this server gave", cursor)
		}
		start = n
	}
	end := min(start+*limit, len(all))
	out := &api.SnapshotList{Items: all[start:end]}
	if end < len(all) {
		out.NextCursor = strconv.Itoa(end)
	}
	return out, nil
}

func (f *fakeSandboxes) GetSnapshot(_ context.Context, id string) (*api.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.snaps {
		if s.ID == id {
			return &s, nil
		}
	}
	return nil, errdefs.NotFound("snapshot %s not found", id)
}

func (f *fakeSandboxes) DeleteSnapshot(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.snaps)
	f.snaps = slices.DeleteFunc(f.snaps, func(s api.Snapshot) bool { return s.ID == id })
	if len(f.snaps) == n {
		return errdefs.NotFound("snapshot %s not found", id)
	}
	return nil
}

func TestCreateSnapshot(t *testing.T) {
	paused := running("sbp", nil)
	paused.Status = api.StatusPaused
	for _, tc := range []struct {
		name, id, body string
		snapErr        error
		status         int
		has            string // a part of the body
	}{
		{"empty body", "sba", "", nil, 201, `{"snapshotID":"snap-aaaaaaaaaaaa","names":[]}`},
		{"the SDK's body", "sba", `{}`, nil, 201, `"snapshotID":"snap-aaaaaaaaaaaa"`},
		{"memory kept", "sba", `{"memory":true}`, nil, 201, `"snapshotID":"snap-aaaaaaaaaaaa"`},
		{"name null", "sba", `{"name":null}`, nil, 201, `"snapshotID":"snap-aaaaaaaaaaaa"`},
		{"paused sandbox", "sbp", `{}`, nil, 201, `"snapshotID":"snap-aaaaaaaaaaaa"`},
		{"named", "sba", `{"name":"my-snap"}`, nil, 400, "name: agent2env's snapshots have no names"},
		{"files only", "sba", `{"memory":false}`, nil, 400, "memory: false"},
		{"unknown field", "sba", `{"tag":"v1"}`, nil, 400, "tag"},
		{"not an object", "sba", `[]`, nil, 400, `"code":400`},
		{"ended sandbox", "sbdone", `{}`, nil, 404, "has ended"},
		{"unknown sandbox", "nosuch", `{}`, nil, 404, `"code":404`},
		{"runtime without snapshots", "sba", `{}`, errdefs.NotImplemented("cannot snapshot sandbox sba: runtime kubernetes has no snapshots"), 501,
			`"message":"cannot snapshot sandbox sba: runtime kubernetes has no snapshots"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, running("sba", nil), paused, api.Sandbox{ID: "sbdone", Status: api.StatusSucceeded, AccessToken: token})
			e.sb.snapErr = tc.snapErr
			code, _, body := e.api(t, "POST", "/sandboxes/"+tc.id+"/snapshots", tc.body)
			var eb map[string]any
			if code != tc.status || !json.Valid([]byte(body)) || json.Unmarshal([]byte(body), &eb) != nil || !strings.Contains(body, tc.has) {
				t.Fatalf("%d %s, want %d with %q", code, body, tc.status, tc.has)
			}
			if tc.status != 201 && (len(e.sb.snaps) != 0 || eb["code"] != float64(tc.status)) {
				t.Errorf("refused, yet %d snapshots; body %s", len(e.sb.snaps), body)
			}
		})
	}
	e := newEnv(t, running("sba", nil))
	if code, hdr, _ := e.api(t, "GET", "/sandboxes/sba/snapshots", ""); code != 405 || hdr.Get("Allow") != "POST" {
		t.Errorf("GET of a sandbox's snapshots: %d, Allow %q; want 405, POST", code, hdr.Get("Allow"))
	}
}

func TestListSnapshots(t *testing.T) {
	e := newEnv(t, running("sba", nil), running("sbb", nil))
	for _, id := range []string{"sba", "sbb", "sba"} {
		if code, _, body := e.api(t, "POST", "/sandboxes/"+id+"/snapshots", "{}"); code != 201 {
			t.Fatalf("snapshot %s: %d %s", id, code, body)
		}
	}
	for _, tc := range []struct {
		name, query string
		status      int
		want        string // the body, or a part of an error's
		next        string
	}{
		{"all, newest first", "", 200, `[{"snapshotID":"snap-aaaaaaaaaaac","names":[]},{"snapshotID":"snap-aaaaaaaaaaab","names":[]},{"snapshotID":"snap-aaaaaaaaaaaa","names":[]}]`, ""},
		{"a page", "?limit=2", 200, `[{"snapshotID":"snap-aaaaaaaaaaac","names":[]},{"snapshotID":"snap-aaaaaaaaaaab","names":[]}]`, "2"},
		{"the next page", "?limit=2&nextToken=2", 200, `[{"snapshotID":"snap-aaaaaaaaaaaa","names":[]}]`, ""},
		{"of a sandbox", "?sandboxID=sba", 200, `[{"snapshotID":"snap-aaaaaaaaaaac","names":[]},{"snapshotID":"snap-aaaaaaaaaaaa","names":[]}]`, ""},
		{"of a sandbox without any", "?sandboxID=nosuch", 200, `[]`, ""},
		{"by id", "?name=snap-aaaaaaaaaaab", 200, `[{"snapshotID":"snap-aaaaaaaaaaab","names":[]}]`, ""},
		{"by id and its sandbox", "?name=snap-aaaaaaaaaaab&sandboxID=sbb", 200, `[{"snapshotID":"snap-aaaaaaaaaaab","names":[]}]`, ""},
		{"by id and another sandbox", "?name=snap-aaaaaaaaaaab&sandboxID=sba", 200, `[]`, ""},
		{"by a name", "?name=my-snap", 200, `[]`, ""},
		{"by an unknown id", "?name=snap-zzzzzzzzzzzz", 200, `[]`, ""},
		{"limit zero", "?limit=0", 400, `limit \"0\": want a whole number from 1 to 100`, ""},
		{"limit too big", "?limit=101", 400, "from 1 to 100", ""},
		{"bad token", "?nextToken=x", 400, "cursor", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := e.api(t, "GET", "/snapshots"+tc.query, "")
			if tc.status == 200 && (code != 200 || body != tc.want+"\n") || tc.status != 200 && (code != tc.status || !strings.Contains(body, tc.want)) {
				t.Errorf("%d %s, want %d %s", code, body, tc.status, tc.want)
			}
			if got := hdr.Get(HeaderNextToken); got != tc.next {
				t.Errorf("%s %q, want %q", HeaderNextToken, got, tc.next)
			}
		})
	}
	if code, _, body := e.api(t, "GET", "/snapshots/snap-aaaaaaaaaaaa", ""); code != 404 {
		t.Errorf("GET /snapshots/{id}: %d %s, want 404", code, body)
	}
	if code, hdr, _ := e.api(t, "POST", "/snapshots", "{}"); code != 405 || hdr.Get("Allow") != "GET" {
		t.Errorf("POST /snapshots: %d, Allow %q; want 405, GET", code, hdr.Get("Allow"))
	}
}

func TestDeleteSnapshot(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	e.sb.snaps = []api.Snapshot{{ID: "snap-abcdefgh2345", SandboxID: "sba"}}
	for _, tc := range []struct {
		name, method, path string
		status             int
		has                string
	}{
		{"a snapshot's template", "GET", "/templates/snap-abcdefgh2345", 405, `"code":405`},
		{"delete", "DELETE", "/templates/snap-abcdefgh2345", 204, ""},
		// The SDK's delete_snapshot reads 404 as false.
		{"delete again", "DELETE", "/templates/snap-abcdefgh2345", 404, "snapshot snap-abcdefgh2345 not found"},
		{"delete escaped", "DELETE", "/templates/snap-zzzzzzzzzzz%7A", 404, "snapshot snap-zzzzzzzzzzzz not found"},
		{"a template", "DELETE", "/templates/mytpl", 501, "template builds"},
		{"under a snapshot's template", "DELETE", "/templates/snap-abcdefgh2345/builds", 501, "template builds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, _, body := e.api(t, tc.method, tc.path, ""); code != tc.status || !strings.Contains(body, tc.has) {
				t.Errorf("%s %s: %d %s, want %d with %q", tc.method, tc.path, code, body, tc.status, tc.has)
			}
		})
	}
}

// TestSnapshotsNotServed: a daemon without the snapshot service answers
// E2B's snapshot calls 501 in E2B's form, and makes nothing.
func TestSnapshotsNotServed(t *testing.T) {
	e := newEnv(t, running("sba", nil))
	h, err := New(Config{Sandboxes: e.sb, Keys: e.h.cfg.Keys, RequireKey: true})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.srv.Config.Handler = h.Wrap(next)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/sandboxes/sba/snapshots", "{}"},
		{"GET", "/snapshots", ""},
		{"DELETE", "/templates/snap-abcdefgh2345", ""},
	} {
		if code, _, body := e.api(t, tc.method, tc.path, tc.body); code != 501 || !strings.Contains(body, `"message":"E2B's snapshots are not served by this daemon"`) {
			t.Errorf("%s %s: %d %s, want 501", tc.method, tc.path, code, body)
		}
	}
	if len(e.sb.snaps) != 0 {
		t.Errorf("snapshots made: %v", e.sb.snaps)
	}
}
