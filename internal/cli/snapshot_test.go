package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/google/go-cmp/cmp"
)

// fakeSnapshotDaemon serves the snapshot routes, sandbox creation from a
// snapshot and sandbox GETs from memory, and records every request as
// "METHOD PATH?QUERY BODY". Sandbox "run1" runs and "off1" is stopped;
// snapshots "snap-a" (of run1) and "snap-b" (of gone1) exist.
type fakeSnapshotDaemon struct {
	recorder
	sandboxes map[string]*api.Sandbox
	snapshots []api.Snapshot // newest first
}

var snapshotTime = time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)

func newFakeSnapshotDaemon(t *testing.T) *fakeSnapshotDaemon {
	d := &fakeSnapshotDaemon{
		sandboxes: map[string]*api.Sandbox{
			"run1": {ID: "run1", Status: api.StatusRunning},
			"off1": {ID: "off1", Status: api.StatusSucceeded},
		},
		snapshots: []api.Snapshot{
			{ID: "snap-a", SandboxID: "run1", Image: "agent2env/python", CPU: "1", Memory: "512Mi", Runtime: "oci",
				Status: api.SnapshotReady, SizeBytes: 3 << 20, CreatedAt: snapshotTime},
			{ID: "snap-b", SandboxID: "gone1", Image: "agent2env/python", Template: "py", CPU: "2", Memory: "1Gi", Runtime: "oci",
				Status: api.SnapshotReady, Stopped: true, SizeBytes: 5 << 30, CreatedAt: snapshotTime},
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/snapshots", d.create)
	mux.HandleFunc("GET /api/v1/snapshots", d.list)
	mux.HandleFunc("DELETE /api/v1/snapshots/{id}", d.remove)
	mux.HandleFunc("POST /api/v1/sandboxes", d.restore)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}", d.get)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/fork", d.fork)
	d.serve(t, mux)
	return d
}

// fork makes the count of sandboxes asked, fork-1, fork-2, ...
func (d *fakeSnapshotDaemon) fork(w http.ResponseWriter, r *http.Request) {
	var req api.ForkRequest
	json.NewDecoder(r.Body).Decode(&req)
	res := api.ForkResponse{SnapshotID: "snap-f"}
	for i := range req.Count {
		res.Sandboxes = append(res.Sandboxes, api.ForkedSandbox{Sandbox: api.Sandbox{ID: fmt.Sprintf("fork-%d", i+1),
			Status: api.StatusRunning}, Contexts: map[string]string{}})
	}
	reply(w, http.StatusCreated, res)
}

// TestFork checks that fork prints the ids alone, as sandbox create
// prints its id, and the table on request.
func TestFork(t *testing.T) {
	newFakeSnapshotDaemon(t)
	tests := []struct {
		args       []string
		stdoutPart string
	}{
		{[]string{"sandbox", "fork", "run1", "--count", "2"}, "fork-1\nfork-2\n"},
		{[]string{"sandbox", "fork", "run1", "--count", "2", "-q"}, "fork-1\nfork-2\n"},
		{[]string{"sandbox", "fork", "run1", "-o", "table"}, "ID "},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, tt.args...)
		if code != 0 || !strings.HasPrefix(stdout, tt.stdoutPart) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want stdout starting %q", tt.args, code, stdout, stderr, tt.stdoutPart)
		}
	}
}

func (d *fakeSnapshotDaemon) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSnapshotRequest
	if r.ContentLength > 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
			return
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	id := r.PathValue("id")
	sb := d.sandboxes[id]
	switch {
	case sb == nil:
		fail(w, http.StatusNotFound, api.CodeSandboxNotFound, fmt.Sprintf("sandbox %s not found", id))
		return
	case sb.Status != api.StatusRunning:
		fail(w, http.StatusConflict, api.CodeConflict, fmt.Sprintf("cannot snapshot sandbox %s: it is %s", id, sb.Status))
		return
	}
	if req.Stop {
		sb.Status = api.StatusSucceeded
	}
	snap := api.Snapshot{ID: fmt.Sprintf("snap-%d", len(d.snapshots)+1), SandboxID: id, Image: "agent2env/python",
		CPU: "1", Memory: "512Mi", Runtime: "oci", Status: api.SnapshotReady, Stopped: req.Stop, SizeBytes: 1500,
		CreatedAt: snapshotTime}
	d.snapshots = append([]api.Snapshot{snap}, d.snapshots...)
	reply(w, http.StatusCreated, snap)
}

func (d *fakeSnapshotDaemon) list(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := api.SnapshotList{Items: []api.Snapshot{}}
	for _, s := range d.snapshots {
		if q := r.URL.Query().Get("sandbox_id"); q == "" || q == s.SandboxID {
			out.Items = append(out.Items, s)
		}
	}
	reply(w, http.StatusOK, out)
}

func (d *fakeSnapshotDaemon) remove(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, s := range d.snapshots {
		if s.ID == r.PathValue("id") {
			d.snapshots = append(d.snapshots[:i], d.snapshots[i+1:]...)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	fail(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("snapshot %s not found", r.PathValue("id")))
}

// restore makes a running sandbox of a known snapshot.
func (d *fakeSnapshotDaemon) restore(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.snapshots {
		if s.ID == req.FromSnapshot {
			sb := &api.Sandbox{ID: fmt.Sprintf("sb%d", len(d.sandboxes)+1), Image: s.Image, Status: api.StatusRunning, Metadata: req.Metadata}
			d.sandboxes[sb.ID] = sb
			reply(w, http.StatusCreated, sb)
			return
		}
	}
	fail(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("snapshot %s not found", req.FromSnapshot))
}

func (d *fakeSnapshotDaemon) get(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if sb := d.sandboxes[r.PathValue("id")]; sb != nil {
		reply(w, http.StatusOK, sb)
		return
	}
	fail(w, http.StatusNotFound, api.CodeSandboxNotFound, fmt.Sprintf("sandbox %s not found", r.PathValue("id")))
}

// TestSnapshotCommands runs the snapshot commands under both their
// paths, "snapshot" and "sandbox snapshot", against the fake daemon.
func TestSnapshotCommands(t *testing.T) {
	table := "ID       SANDBOX   IMAGE              SIZE      CPU   MEMORY   AGE\n" +
		"snap-a   run1      agent2env/python   3.0 MiB   1     512Mi    2h\n" +
		"snap-b   gone1     agent2env/python   5.0 GiB   2     1Gi      2h\n"
	tests := []struct {
		name     string
		args     []string
		want     result
		requests []string
		left     []string // the snapshots' ids afterwards
	}{
		{
			name:     "create",
			args:     []string{"create", "run1"},
			want:     result{Stdout: "snap-3\n"},
			requests: []string{"POST /api/v1/sandboxes/run1/snapshots {}"},
			left:     []string{"snap-3", "snap-a", "snap-b"},
		},
		{
			name:     "create and stop",
			args:     []string{"create", "--stop", "run1", "-q"},
			want:     result{Stdout: "snap-3\n"},
			requests: []string{"POST /api/v1/sandboxes/run1/snapshots {\"stop\":true}"},
			left:     []string{"snap-3", "snap-a", "snap-b"},
		},
		{
			name:     "create of a stopped sandbox",
			args:     []string{"create", "off1"},
			want:     result{Code: 1, Stderr: "cannot snapshot sandbox off1: it is succeeded (CONFLICT, HTTP 409)"},
			requests: []string{"POST /api/v1/sandboxes/off1/snapshots {}"},
			left:     []string{"snap-a", "snap-b"},
		},
		{
			name:     "ls",
			args:     []string{"ls"},
			want:     result{Stdout: table},
			requests: []string{"GET /api/v1/snapshots"},
			left:     []string{"snap-a", "snap-b"},
		},
		{
			name: "ls wide of a sandbox",
			args: []string{"list", "--sandbox", "gone1", "-o", "wide"},
			want: result{Stdout: "ID       SANDBOX   IMAGE              SIZE      CPU   MEMORY   AGE   TEMPLATE   STOPPED   RUNTIME\n" +
				"snap-b   gone1     agent2env/python   5.0 GiB   2     1Gi      2h    py         yes       oci\n"},
			requests: []string{"GET /api/v1/snapshots?sandbox_id=gone1"},
			left:     []string{"snap-a", "snap-b"},
		},
		{
			name:     "ls ids",
			args:     []string{"ls", "-q"},
			want:     result{Stdout: "snap-a\nsnap-b\n"},
			requests: []string{"GET /api/v1/snapshots"},
			left:     []string{"snap-a", "snap-b"},
		},
		{
			name:     "rm does what it can",
			args:     []string{"rm", "snap-a", "snap-x", "snap-b"},
			want:     result{Code: 1, Stdout: "snap-a\nsnap-b\n", Stderr: "snapshot snap-x not found (NOT_FOUND, HTTP 404)"},
			requests: []string{"DELETE /api/v1/snapshots/snap-a", "DELETE /api/v1/snapshots/snap-x", "DELETE /api/v1/snapshots/snap-b"},
			left:     []string{},
		},
	}
	for _, path := range [][]string{{"snapshot"}, {"sandbox", "snapshot"}} {
		for _, tt := range tests {
			t.Run(strings.Join(path, " ")+" "+tt.name, func(t *testing.T) {
				d := newFakeSnapshotDaemon(t)
				check(t, append(append([]string{}, path...), tt.args...), tt.want)
				if diff := cmp.Diff(tt.requests, d.requests); diff != "" {
					t.Errorf("requests (-want +got):\n%s", diff)
				}
				left := []string{}
				for _, s := range d.snapshots {
					left = append(left, s.ID)
				}
				if diff := cmp.Diff(tt.left, left); diff != "" {
					t.Errorf("snapshots afterwards (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestSnapshotListOutput(t *testing.T) {
	d := newFakeSnapshotDaemon(t)
	checkListOutput(t, []string{"snapshot", "ls"}, api.SnapshotList{Items: d.snapshots}, "snap-a\nsnap-b\n")
}

// TestCreateFromSnapshot makes a sandbox of a snapshot: the request holds
// the snapshot and the ttl only.
func TestCreateFromSnapshot(t *testing.T) {
	d := newFakeSnapshotDaemon(t)
	check(t, []string{"sandbox", "create", "--from-snapshot", "snap-a", "--ttl", "60"}, result{Stdout: "sb3\n"})
	if got, want := d.requests[0], "POST /api/v1/sandboxes {\"ttl\":60,\"from_snapshot\":\"snap-a\"}"; got != want {
		t.Errorf("request %q, want %q", got, want)
	}
	check(t, []string{"sandbox", "create", "--from-snapshot", "snap-x"},
		result{Code: 1, Stderr: "snapshot snap-x not found (NOT_FOUND, HTTP 404)"})
}

func TestSnapshotUsageErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"snapshot"}, "usage: agent2env snapshot <command>"},
		{[]string{"snapshot", "create"}, "need one sandbox ID"},
		{[]string{"snapshot", "create", "a", "b"}, "unexpected argument \"b\"\n"},
		{[]string{"snapshot", "create"}, "need one sandbox ID"},
		{[]string{"snapshot", "rm"}, "need at least one snapshot id"},
		{[]string{"snapshot", "ls", "extra"}, `unexpected argument "extra": a sandbox is given as --sandbox extra`},
		{[]string{"sandbox", "snapshot", "ls", "sb1"}, `unexpected argument "sb1": a sandbox is given as --sandbox sb1`},
		{[]string{"snapshot", "ls", "--sandbox", "sb1", "sb2"}, "unexpected argument \"sb2\"\n"},
		{[]string{"snapshot", "ls", "sb1", "sb2"}, "unexpected argument \"sb1\"\n"},
		{[]string{"sandbox", "create", "--from-snapshot", "snap-a", "--image", "x"}, "--from-snapshot takes only --ttl besides"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			d := newFakeSnapshotDaemon(t)
			checkUsageError(t, &d.recorder, tt.args, tt.stderr)
		})
	}
}
