package opensandbox

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// fakeSnapshots is the snapshot service in memory. Sandbox "nosnap" is
// on a runtime without snapshots.
type fakeSnapshots struct {
	mu    sync.Mutex
	byID  map[string]*api.Snapshot
	order []string // oldest first
	taken []string // sandboxes snapshotted
}

func newFakeSnapshots() *fakeSnapshots {
	return &fakeSnapshots{byID: map[string]*api.Snapshot{}}
}

// add records a snapshot of sandbox sb taken m minutes after now.
func (f *fakeSnapshots) add(id, sb string, m int) *api.Snapshot {
	snap := &api.Snapshot{ID: id, SandboxID: sb, Image: "ubuntu", CPU: "1", Memory: "2Gi", Status: api.SnapshotReady,
		CreatedAt: now.Add(time.Duration(m) * time.Minute)}
	f.byID[id] = snap
	f.order = append(f.order, id)
	return snap
}

func (f *fakeSnapshots) Snapshot(_ context.Context, id string, req api.CreateSnapshotRequest) (*api.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == "nosnap" {
		return nil, errdefs.WithCode(errdefs.NotImplemented("cannot snapshot: runtime fake has no snapshots"), api.CodeNotImplemented)
	}
	if req.Stop {
		return nil, fmt.Errorf("the surface asked to stop sandbox %s", id)
	}
	f.taken = append(f.taken, id)
	out := *f.add(fmt.Sprintf("snap-%d", len(f.order)+1), id, len(f.order))
	return &out, nil
}

func (f *fakeSnapshots) Snapshots(_ context.Context, sandboxID string) (*api.SnapshotList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &api.SnapshotList{Items: []api.Snapshot{}}
	for _, id := range slices.Backward(f.order) {
		if snap := f.byID[id]; sandboxID == "" || snap.SandboxID == sandboxID {
			out.Items = append(out.Items, *snap)
		}
	}
	return out, nil
}

func (f *fakeSnapshots) GetSnapshot(_ context.Context, id string) (*api.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	snap, ok := f.byID[id]
	if !ok {
		return nil, errdefs.WithCode(errdefs.NotFound("snapshot %s not found", id), api.CodeNotFound)
	}
	out := *snap
	return &out, nil
}

func (f *fakeSnapshots) DeleteSnapshot(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.byID[id]; !ok {
		return errdefs.WithCode(errdefs.NotFound("snapshot %s not found", id), api.CodeNotFound)
	}
	delete(f.byID, id)
	f.order = slices.DeleteFunc(f.order, func(s string) bool { return s == id })
	return nil
}

func TestCreateSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name, target, body string
		wantStatus         int
		wantCode           string
		wantInMsg          string
	}{
		{name: "no body", target: "/v1/sandboxes/a/snapshots", wantStatus: 202},
		{name: "empty object, as the SDK sends", target: "/v1/sandboxes/a/snapshots", body: `{}`, wantStatus: 202},
		{name: "name", target: "/v1/sandboxes/a/snapshots", body: `{"name":"before-import"}`, wantStatus: 400, wantCode: api.CodeInvalidRequest},
		{name: "name null", target: "/v1/sandboxes/a/snapshots", body: `{"name":null}`, wantStatus: 202},
		{name: "unknown field", target: "/v1/sandboxes/a/snapshots", body: `{"description":"x"}`,
			wantStatus: 400, wantCode: api.CodeInvalidRequest, wantInMsg: "description"},
		{name: "unknown fields, the first named", target: "/v1/sandboxes/a/snapshots", body: `{"ttl":60,"labels":{}}`,
			wantStatus: 400, wantCode: api.CodeInvalidRequest, wantInMsg: "labels"},
		{name: "name of another case", target: "/v1/sandboxes/a/snapshots", body: `{"Name":"x"}`,
			wantStatus: 400, wantCode: api.CodeInvalidRequest, wantInMsg: "Name"},
		{name: "name not a string", target: "/v1/sandboxes/a/snapshots", body: `{"name":1}`,
			wantStatus: 400, wantCode: api.CodeInvalidRequest, wantInMsg: "name must be a string (got number)"},
		{name: "not JSON", target: "/v1/sandboxes/a/snapshots", body: `{`, wantStatus: 400},
		{name: "not an object", target: "/v1/sandboxes/a/snapshots", body: `[]`, wantStatus: 400},
		{name: "paused sandbox", target: "/v1/sandboxes/p/snapshots", body: `{}`, wantStatus: 409, wantCode: "SANDBOX_NOT_RUNNING"},
		{name: "unknown sandbox", target: "/v1/sandboxes/nope/snapshots", body: `{}`, wantStatus: 404, wantCode: api.CodeSandboxNotFound},
		{name: "runtime without snapshots", target: "/v1/sandboxes/nosnap/snapshots", body: `{}`, wantStatus: 501, wantCode: api.CodeNotImplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t, sandbox("a", api.StatusRunning, 0), sandbox("p", api.StatusPaused, 0), sandbox("nosnap", api.StatusRunning, 0))
			rec, body := s.do(t, "POST", tc.target, tc.body, nil)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantCode != "" && body["code"] != tc.wantCode {
				t.Errorf("code %v, want %s", body["code"], tc.wantCode)
			}
			if msg, _ := body["message"].(string); !strings.Contains(msg, tc.wantInMsg) {
				t.Errorf("message %q does not name %q", msg, tc.wantInMsg)
			}
			if rec.Code != http.StatusAccepted {
				if len(s.snaps.taken) > 0 {
					t.Errorf("refused, yet snapshotted %v", s.snaps.taken)
				}
				return
			}
			if rec.Header().Get("Location") != "/v1/snapshots/snap-1" {
				t.Errorf("Location %q", rec.Header().Get("Location"))
			}
			want := map[string]any{"id": "snap-1", "sandboxId": "a", "createdAt": "2026-12-04T15:00:00Z",
				"status": map[string]any{"state": "Ready", "reason": "snapshot_ready", "lastTransitionAt": "2026-12-04T15:00:00Z"}}
			if !reflect.DeepEqual(body, want) {
				t.Errorf("body %v, want %v", body, want)
			}
		})
	}
}

func TestGetDeleteSnapshot(t *testing.T) {
	s := newSetup(t)
	s.snaps.add("s1", "a", 0)
	for _, tc := range []struct {
		name, method, target string
		wantStatus           int
	}{
		{"get", "GET", "/v1/snapshots/s1", 200},
		{"get unknown", "GET", "/v1/snapshots/nope", 404},
		{"delete", "DELETE", "/v1/snapshots/s1", 204},
		{"gone", "GET", "/v1/snapshots/s1", 404},
		{"delete again", "DELETE", "/v1/snapshots/s1", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := s.expect(t, tc.method, tc.target, "", tc.wantStatus)
			if tc.wantStatus == 200 && (body["id"] != "s1" || body["sandboxId"] != "a" || body["status"].(map[string]any)["state"] != "Ready") {
				t.Errorf("body %v", body)
			}
		})
	}
}

func TestListSnapshots(t *testing.T) {
	s := newSetup(t)
	for i, sb := range []string{"a", "b", "a", "a", "b"} {
		s.snaps.add(fmt.Sprintf("s%d", i+1), sb, i)
	}
	for _, tc := range []struct {
		query      string
		wantStatus int
		wantIDs    string
		wantPage   string // page pageSize totalItems totalPages hasNextPage
	}{
		{"", 200, "s5 s4 s3 s2 s1", "1 20 5 1 false"},
		{"?sandboxId=a", 200, "s4 s3 s1", "1 20 3 1 false"},
		{"?pageSize=2", 200, "s5 s4", "1 2 5 3 true"},
		{"?pageSize=2&page=3", 200, "s1", "3 2 5 3 false"},
		{"?pageSize=2&page=4", 200, "", "4 2 5 3 false"},
		{"?state=Ready", 200, "s5 s4 s3 s2 s1", "1 20 5 1 false"},
		{"?state=ready&sandboxId=b", 200, "s5 s2", "1 20 2 1 false"},
		{"?state=Creating&state=Failed", 200, "", "1 20 0 0 false"},
		{"?state=Failed&state=Ready", 200, "s5 s4 s3 s2 s1", "1 20 5 1 false"},
		{"?name=before-import", 200, "", "1 20 0 0 false"},
		{"?state=Sleeping", 400, "", ""},
		{"?page=0", 400, "", ""},
		{"?pageSize=201", 400, "", ""},
		// A page whose first item's position overflows: 400, not a panic.
		{"?page=2305843009213693953&pageSize=6", 400, "", ""},
		{"?page=" + strconv.Itoa(maxPage) + "&pageSize=200", 200, "", fmt.Sprint(float64(maxPage)) + " 200 5 1 false"},
		{"?sandboxId=a&x=%zz", 400, "", ""},
	} {
		t.Run(tc.query, func(t *testing.T) {
			body := s.expect(t, "GET", "/v1/snapshots"+tc.query, "", tc.wantStatus)
			if tc.wantStatus != 200 {
				return
			}
			var ids []string
			for _, it := range body["items"].([]any) {
				ids = append(ids, it.(map[string]any)["id"].(string))
			}
			if got := strings.Join(ids, " "); got != tc.wantIDs {
				t.Errorf("items %q, want %q", got, tc.wantIDs)
			}
			p := body["pagination"].(map[string]any)
			if got := fmt.Sprint(p["page"], p["pageSize"], p["totalItems"], p["totalPages"], p["hasNextPage"]); got != tc.wantPage {
				t.Errorf("pagination %s, want %s", got, tc.wantPage)
			}
		})
	}
}

func TestCreateFromSnapshot(t *testing.T) {
	ttl := func(n int) *int { return &n }
	for _, tc := range []struct {
		name, body string
		wantStatus int
		wantReq    *api.CreateSandboxRequest
		wantInMsg  string
	}{
		{name: "as the python SDK sends it", wantStatus: 202,
			body:    `{"snapshotId":"s1","timeout":600,"resourceLimits":{"cpu":"1","memory":"2Gi"},"entrypoint":["tail","-f","/dev/null"],"secureAccess":false}`,
			wantReq: &api.CreateSandboxRequest{FromSnapshot: "s1", TTL: ttl(600)}},
		{name: "the snapshot's resources in other units", wantStatus: 202,
			body:    `{"snapshotId":"s1","resourceLimits":{"cpu":"1000m","memory":"2048Mi"},"metadata":{"team":"ml"}}`,
			wantReq: &api.CreateSandboxRequest{FromSnapshot: "s1", TTL: ttl(0), Metadata: map[string]string{"team": "ml"}}},
		{name: "only the id", body: `{"snapshotId":"s1"}`, wantStatus: 202, wantReq: &api.CreateSandboxRequest{FromSnapshot: "s1", TTL: ttl(0)}},
		{name: "other cpu", body: `{"snapshotId":"s1","resourceLimits":{"cpu":"2"}}`, wantStatus: 400, wantInMsg: "resourceLimits.cpu"},
		{name: "other memory", body: `{"snapshotId":"s1","resourceLimits":{"memory":"1Gi"}}`, wantStatus: 400, wantInMsg: "resourceLimits.memory"},
		{name: "gpu", body: `{"snapshotId":"s1","resourceLimits":{"gpu":"1"}}`, wantStatus: 400, wantInMsg: "resourceLimits.gpu"},
		{name: "unknown snapshot with limits", body: `{"snapshotId":"nope","resourceLimits":{"cpu":"1"}}`, wantStatus: 404},
		{name: "env", body: `{"snapshotId":"s1","env":{"A":"b"}}`, wantStatus: 400, wantInMsg: "env"},
		{name: "network policy", body: `{"snapshotId":"s1","networkPolicy":{"defaultAction":"deny"}}`, wantStatus: 400, wantInMsg: "networkPolicy"},
		{name: "image too", body: `{"snapshotId":"s1","image":{"uri":"ubuntu"}}`, wantStatus: 400, wantInMsg: "image"},
		{name: "template too", body: `{"snapshotId":"s1","templateId":"py"}`, wantStatus: 400, wantInMsg: "templateId"},
		{name: "main process", body: `{"snapshotId":"s1","entrypoint":["python","/workspace/app.py"]}`, wantStatus: 400, wantInMsg: "entrypoint"},
		{name: "volumes", body: `{"snapshotId":"s1","volumes":[{"name":"v"}]}`, wantStatus: 400, wantInMsg: "volumes"},
		{name: "bad timeout", body: `{"snapshotId":"s1","timeout":0}`, wantStatus: 400, wantInMsg: "timeout"},
		{name: "bad metadata", body: `{"snapshotId":"s1","metadata":{"opensandbox.io/x":"y"}}`, wantStatus: 400, wantInMsg: "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t)
			s.snaps.add("s1", "a", 0)
			rec, body := s.do(t, "POST", "/v1/sandboxes", tc.body, nil)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if msg, _ := body["message"].(string); !strings.Contains(msg, tc.wantInMsg) {
				t.Errorf("message %q does not name %q", msg, tc.wantInMsg)
			}
			switch {
			case tc.wantReq == nil && len(s.sbs.created) > 0:
				t.Errorf("refused, yet created %+v", s.sbs.created)
			case tc.wantReq != nil && (len(s.sbs.created) != 1 || !reflect.DeepEqual(s.sbs.created[0], *tc.wantReq)):
				t.Errorf("created %+v, want %+v", s.sbs.created, *tc.wantReq)
			}
		})
	}
}

func TestSnapshotsNotServed(t *testing.T) {
	s := newSetup(t, sandbox("a", api.StatusRunning, 0))
	s.h.cfg.Snapshots = nil
	for _, tc := range []struct{ method, target, body string }{
		{"GET", "/v1/snapshots", ""},
		{"GET", "/v1/snapshots/s1", ""},
		{"DELETE", "/v1/snapshots/s1", ""},
		{"POST", "/v1/sandboxes/a/snapshots", "{}"},
		{"POST", "/v1/sandboxes", `{"snapshotId":"s1"}`},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			body := s.expect(t, tc.method, tc.target, tc.body, http.StatusNotImplemented)
			if body["code"] != api.CodeNotImplemented {
				t.Errorf("code %v", body["code"])
			}
		})
	}
}
