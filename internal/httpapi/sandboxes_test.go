package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

func TestHealth(t *testing.T) {
	e := newEnv(t, envOptions{notReady: true})
	for _, p := range []string{"/health", "/api/v1/health"} {
		resp := e.do(t, http.MethodGet, p, "", nil)
		if resp.status != http.StatusOK || string(resp.body) != "OK" {
			t.Errorf("GET %s: %d %q", p, resp.status, resp.body)
		}
	}
	checkError(t, e.do(t, http.MethodGet, "/readyz", "", nil), http.StatusServiceUnavailable, api.CodeUnavailable)
	e.srv.SetReady(true)
	if resp := e.do(t, http.MethodGet, "/readyz", "", nil); resp.status != http.StatusOK || string(resp.body) != "ready" {
		t.Errorf("GET /readyz when ready: %d %q", resp.status, resp.body)
	}
	e.srv.SetReady(false)
	checkError(t, e.do(t, http.MethodGet, "/readyz", "", nil), http.StatusServiceUnavailable, api.CodeUnavailable)
}

func TestSandboxRoutes(t *testing.T) {
	e := newEnv(t, envOptions{cfg: manager.Config{ExecOutputLimit: 1000}})

	if resp := e.do(t, http.MethodGet, "/api/v1/sandboxes", "", nil); resp.status != http.StatusOK || string(resp.body) != "{\"items\":[]}\n" {
		t.Errorf("empty list: %d %s", resp.status, resp.body)
	}

	// Create.
	resp := e.postJSON(t, "/api/v1/sandboxes", `{"image":"alpine","cpu":"500m","memory":"256Mi","ttl":60,"env":{"GREETING":"hi"}}`)
	if resp.status != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.status, resp.body)
	}
	if ct := resp.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	checkKeys(t, "sandbox", resp.body, "id", "image", "cpu", "memory", "ttl", "env", "status", "state", "created_at", "updated_at", "expires_at", "reason", "accessToken", "accessUrl")
	var sb api.Sandbox
	if err := json.Unmarshal(resp.body, &sb); err != nil {
		t.Fatal(err)
	}
	if sb.ExpiresAt.Sub(sb.CreatedAt) != 60*time.Second {
		t.Errorf("created %v, expires %v", sb.CreatedAt, sb.ExpiresAt)
	}
	want := api.Sandbox{ID: sb.ID, Image: "alpine", CPU: "500m", Memory: "256Mi", TTL: 60, Env: map[string]string{"GREETING": "hi"},
		Status: api.StatusRunning, Reason: "agent ready", CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, ExpiresAt: sb.ExpiresAt,
		AccessToken: sb.AccessToken, AccessURL: "http://gw.test/api/v1/sandbox/" + sb.ID}
	if len(sb.AccessToken) != 64 {
		t.Errorf("accessToken %q is not 64 hex characters", sb.AccessToken)
	}
	if diff := cmp.Diff(want, sb); diff != "" {
		t.Errorf("created sandbox (-want +got):\n%s", diff)
	}
	id := sb.ID

	// A sandbox that never expires expires at the end of time, as
	// LiteBoxd reports it (its clients require the field).
	forever := e.createSandbox(t, `{"image":"alpine","ttl":0}`)
	if !forever.ExpiresAt.Equal(api.Never) || forever.TTL != 0 {
		t.Errorf("ttl 0: %+v", forever)
	}

	// Get and list.
	resp = e.do(t, http.MethodGet, "/api/v1/sandboxes/"+id, "", nil)
	if resp.status != http.StatusOK {
		t.Fatalf("get: %d %s", resp.status, resp.body)
	}
	var got api.Sandbox
	if err := json.Unmarshal(resp.body, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("got sandbox (-want +got):\n%s", diff)
	}
	resp = e.do(t, http.MethodGet, "/api/v1/sandboxes", "", nil)
	checkKeys(t, "list", resp.body, "items")
	if diff := cmp.Diff([]string{id, forever.ID}, e.ids(t)); diff != "" {
		t.Errorf("listed ids (-want +got):\n%s", diff)
	}

	// Exec.
	resp = e.postJSON(t, "/api/v1/sandboxes/"+id+"/exec", `{"command":["sh","-c","echo $GREETING; echo oops >&2; exit 4"]}`)
	if resp.status != http.StatusOK {
		t.Fatalf("exec: %d %s", resp.status, resp.body)
	}
	checkKeys(t, "exec response", resp.body, "exit_code", "stdout", "stderr", "duration_ms")
	var res api.ExecResponse
	if err := json.Unmarshal(resp.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 4 || res.Stdout != "hi\n" || res.Stderr != "oops\n" || res.DurationMS <= 0 {
		t.Errorf("exec response %+v", res)
	}
	resp = e.postJSON(t, "/api/v1/sandboxes/"+id+"/exec",
		`{"command":["sh","-c","cat; echo \" $X\"; pwd"],"stdin":"in","env":{"X":"y"},"cwd":"/etc"}`)
	if err := json.Unmarshal(resp.body, &res); err != nil || res.Stdout != "in y\n/etc\n" {
		t.Errorf("exec with stdin, env, cwd: %d %s", resp.status, resp.body)
	}
	resp = e.postJSON(t, "/api/v1/sandboxes/"+id+"/exec", `{"command":["head","-c","5000","/dev/zero"]}`)
	checkKeys(t, "truncated exec response", resp.body, "exit_code", "stdout", "stderr", "duration_ms", "truncated")
	resp = e.postJSON(t, "/api/v1/sandboxes/"+id+"/exec", `{"command":["sleep","10"],"timeout":1}`)
	checkKeys(t, "timed out exec response", resp.body, "exit_code", "stdout", "stderr", "duration_ms", "timed_out")

	// Upload, path field first: streamed.
	ctype, body := multipartBody(t, "path", "dir/f.txt", "mode", "0600", "file", "file content")
	resp = e.do(t, http.MethodPost, "/api/v1/sandboxes/"+id+"/files", ctype, body)
	if resp.status != http.StatusOK {
		t.Fatalf("upload: %d %s", resp.status, resp.body)
	}
	checkKeys(t, "file info", resp.body, "name", "path", "size", "mode", "mod_time", "is_dir")
	var fi api.FileInfo
	if err := json.Unmarshal(resp.body, &fi); err != nil {
		t.Fatal(err)
	}
	if fi.Name != "f.txt" || fi.Path != "/workspace/dir/f.txt" || fi.Size != 12 || fi.Mode != "0600" || fi.IsDir {
		t.Errorf("file info %+v", fi)
	}
	work, err := e.rt.WorkDir(id)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(work, "dir", "f.txt")); err != nil || string(b) != "file content" {
		t.Errorf("uploaded file: %q, %v", b, err)
	}
	// Path in the query.
	ctype, body = multipartBody(t, "file", "from query")
	resp = e.do(t, http.MethodPost, "/api/v1/sandboxes/"+id+"/files?path=/workspace/q.txt", ctype, body)
	if resp.status != http.StatusOK {
		t.Errorf("upload with path in query: %d %s", resp.status, resp.body)
	}

	// Download.
	resp = e.do(t, http.MethodGet, "/api/v1/sandboxes/"+id+"/files?path=dir/f.txt", "", nil)
	if resp.status != http.StatusOK || string(resp.body) != "file content" {
		t.Errorf("download: %d %q", resp.status, resp.body)
	}
	wantHeader := map[string]string{
		"Content-Type": "application/octet-stream", "Content-Length": "12", "Content-Disposition": "attachment; filename=f.txt",
	}
	for k, v := range wantHeader {
		if got := resp.header.Get(k); got != v {
			t.Errorf("download header %s: %q, want %q", k, got, v)
		}
	}

	// Logs.
	resp = e.do(t, http.MethodGet, "/api/v1/sandboxes/"+id+"/logs", "", nil)
	if resp.status != http.StatusOK {
		t.Fatalf("logs: %d %s", resp.status, resp.body)
	}
	checkKeys(t, "logs", resp.body, "logs", "events")
	var logs api.LogsResponse
	if err := json.Unmarshal(resp.body, &logs); err != nil {
		t.Fatal(err)
	}
	if len(logs.Events) != 2 || !strings.HasSuffix(logs.Events[1], " running: agent ready") ||
		!strings.Contains(logs.Logs, "fake agent for sandbox "+id+" listening") {
		t.Errorf("logs %+v", logs)
	}

	// Delete.
	resp = e.do(t, http.MethodDelete, "/api/v1/sandboxes/"+id, "", nil)
	if resp.status != http.StatusNoContent || len(resp.body) != 0 {
		t.Errorf("delete: %d %q", resp.status, resp.body)
	}
	checkError(t, e.do(t, http.MethodGet, "/api/v1/sandboxes/"+id, "", nil), http.StatusNotFound, api.CodeSandboxNotFound)
	checkError(t, e.do(t, http.MethodDelete, "/api/v1/sandboxes/"+id, "", nil), http.StatusNotFound, api.CodeSandboxNotFound)
	if diff := cmp.Diff([]string{forever.ID}, e.ids(t)); diff != "" {
		t.Errorf("listed ids after delete (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{forever.ID}, e.rt.IDs()); diff != "" {
		t.Errorf("runtime ids after delete (-want +got):\n%s", diff)
	}
}

func TestNotReadySandbox(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.rt.SetHooks(fakeruntime.Hooks{Start: func(context.Context, string) error { return errors.New("no agent") }})
	sb := e.createSandbox(t, `{"image":"alpine"}`)
	if sb.Status != api.StatusFailed || sb.Reason != "start sandbox: no agent" {
		t.Errorf("sandbox %+v, want failed", sb)
	}
	ctype, body := multipartBody(t, "path", "f", "file", "x")
	for _, resp := range []response{
		e.postJSON(t, "/api/v1/sandboxes/"+sb.ID+"/exec", `{"command":["true"]}`),
		e.postJSON(t, "/api/v1/sandboxes/"+sb.ID+"/exec/stream", `{"command":["true"]}`),
		e.do(t, http.MethodPost, "/api/v1/sandboxes/"+sb.ID+"/files", ctype, body),
		e.do(t, http.MethodGet, "/api/v1/sandboxes/"+sb.ID+"/files?path=f", "", nil),
	} {
		checkError(t, resp, http.StatusConflict, api.CodeSandboxNotReady)
	}
	// Logs and delete still work.
	if resp := e.do(t, http.MethodGet, "/api/v1/sandboxes/"+sb.ID+"/logs", "", nil); resp.status != http.StatusOK {
		t.Errorf("logs: %d %s", resp.status, resp.body)
	}
	if resp := e.do(t, http.MethodDelete, "/api/v1/sandboxes/"+sb.ID, "", nil); resp.status != http.StatusNoContent {
		t.Errorf("delete: %d %s", resp.status, resp.body)
	}
}

// TestSandboxLimits: a sandbox create past --max-sandboxes is 429
// RESOURCE_LIMIT, one past the host's capacity 507 INSUFFICIENT_CAPACITY,
// and so is a start; each body carries the usage and a suggestion, and
// nothing is made.
func TestSandboxLimits(t *testing.T) {
	e := newEnv(t, envOptions{cfg: manager.Config{MaxSandboxes: 2,
		Host: manager.Host{MilliCPU: 2000, MemoryBytes: 4 << 30}, CPUOvercommit: 1, MemoryOvercommit: 1}})
	check := func(resp response, status int, want api.ResourceError) {
		t.Helper()
		if resp.status != status {
			t.Fatalf("status %d, want %d: %s", resp.status, status, resp.body)
		}
		got := decodeInto[api.ResourceError](t, resp)
		if !strings.Contains(got.Suggestion, want.Suggestion) || got.Message == "" {
			t.Errorf("body %s: want a message and a suggestion saying %q", resp.body, want.Suggestion)
		}
		if got.Code != want.Code || got.Usage != want.Usage {
			t.Errorf("body %s: want code %s, usage %+v", resp.body, want.Code, want.Usage)
		}
		if n := len(decodeInto[api.SandboxList](t, e.do(t, http.MethodGet, "/api/v1/sandboxes", "", nil)).Items); n != want.Usage.Sandboxes {
			t.Errorf("%d sandboxes after a refusal, want %d", n, want.Usage.Sandboxes)
		}
	}
	usage := api.Usage{Sandboxes: 1, MaxSandboxes: 2, MilliCPU: 1500, MilliCPUCapacity: 2000, MemoryBytes: 1 << 30, MemoryBytesCapacity: 4 << 30}
	sb := e.createSandbox(t, `{"image":"alpine","cpu":"1500m","memory":"1Gi"}`)
	check(e.postJSON(t, "/api/v1/sandboxes", `{"image":"alpine","cpu":"1","memory":"1Gi"}`), http.StatusInsufficientStorage,
		api.ResourceError{Error: api.Error{Code: api.CodeInsufficientCapacity}, Usage: usage, Suggestion: "ask for less cpu and memory"})
	if resp := e.do(t, http.MethodPost, "/api/v1/sandboxes/"+sb.ID+"/stop", "", nil); resp.status != http.StatusOK {
		t.Fatalf("stop: %d %s", resp.status, resp.body)
	}
	e.createSandbox(t, `{"image":"alpine","cpu":"1","memory":"1Gi"}`)
	usage.Sandboxes, usage.MilliCPU = 2, 1000
	check(e.do(t, http.MethodPost, "/api/v1/sandboxes/"+sb.ID+"/start", "", nil), http.StatusInsufficientStorage,
		api.ResourceError{Error: api.Error{Code: api.CodeInsufficientCapacity}, Usage: usage, Suggestion: "--cpu-overcommit"})
	check(e.postJSON(t, "/api/v1/sandboxes", `{"image":"alpine","cpu":"100m","memory":"64Mi"}`), http.StatusTooManyRequests,
		api.ResourceError{Error: api.Error{Code: api.CodeLimitExceeded}, Usage: usage, Suggestion: "raise --max-sandboxes"})
}

func TestListSandboxPages(t *testing.T) {
	e := newEnv(t, envOptions{})
	var want []string
	for range 5 {
		want = append(want, e.createSandbox(t, `{"image":"alpine"}`).ID)
	}
	list := func(query string) api.SandboxList {
		t.Helper()
		resp := e.do(t, http.MethodGet, "/api/v1/sandboxes"+query, "", nil)
		if resp.status != http.StatusOK {
			t.Fatalf("list %s: %d %s", query, resp.status, resp.body)
		}
		return decodeInto[api.SandboxList](t, resp)
	}
	if l := list(""); len(l.Items) != 5 || l.NextCursor != "" {
		t.Errorf("unpaged list: %d items, next %q; want all 5 and no cursor", len(l.Items), l.NextCursor)
	}
	newest := slices.Clone(want)
	slices.Reverse(newest)
	for _, tt := range []struct {
		order string
		want  []string
	}{{"", want}, {"&order=asc", want}, {"&order=desc", newest}} {
		var got []string
		var sizes []int
		for query := "?limit=2" + tt.order; ; {
			l := list(query)
			sizes = append(sizes, len(l.Items))
			for _, sb := range l.Items {
				got = append(got, sb.ID)
			}
			if l.NextCursor == "" {
				break
			}
			query = "?limit=2" + tt.order + "&cursor=" + url.QueryEscape(l.NextCursor)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" || !cmp.Equal(sizes, []int{2, 2, 1}) {
			t.Errorf("%q: paged ids (-want +got):\n%s\npage sizes %v, want [2 2 1]", tt.order, diff, sizes)
		}
	}
	for _, query := range []string{"?limit=0", "?limit=-1", "?limit=x", "?limit=1001", "?cursor=nope", "?limit=1&cursor=%21",
		"?order=newest", "?order=DESC&limit=1"} {
		resp := e.do(t, http.MethodGet, "/api/v1/sandboxes"+query, "", nil)
		checkError(t, resp, http.StatusBadRequest, api.CodeInvalidRequest)
		if strings.HasPrefix(query, "?order") && !strings.Contains(string(resp.body), `"order \"`) {
			t.Errorf("%s: %s, want a message naming order", query, resp.body)
		}
	}
}

func TestPendingSandbox(t *testing.T) {
	e := newEnv(t, envOptions{})
	sb := e.createSandbox(t, `{"image":"python:3.12"}`)
	if sb.Status != api.StatusPending {
		t.Errorf("status %s, want pending", sb.Status)
	}
	deadline := time.Now().Add(5 * time.Second)
	for sb.Status != api.StatusRunning && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if err := json.Unmarshal(e.do(t, http.MethodGet, "/api/v1/sandboxes/"+sb.ID, "", nil).body, &sb); err != nil {
			t.Fatal(err)
		}
	}
	if sb.Status != api.StatusRunning {
		t.Errorf("status %s (%s), want running", sb.Status, sb.Reason)
	}
	failed := e.createSandbox(t, `{"image":"missing:1"}`)
	for failed.Status == api.StatusPending && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if err := json.Unmarshal(e.do(t, http.MethodGet, "/api/v1/sandboxes/"+failed.ID, "", nil).body, &failed); err != nil {
			t.Fatal(err)
		}
	}
	if failed.Status != api.StatusFailed || !strings.Contains(failed.Reason, "image missing:1 not found") {
		t.Errorf("status %s (%s), want failed", failed.Status, failed.Reason)
	}
}

// TestUploadFileBeforePath sends the file part before the path field: the
// file is spooled, then uploaded.
func TestUploadFileBeforePath(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	content := strings.Repeat("spooled\n", 10000)
	ctype, body := multipartBody(t, "file", content, "mode", "0700", "path", "/workspace/late.sh")
	resp := e.do(t, http.MethodPost, "/api/v1/sandboxes/"+id+"/files", ctype, body)
	if resp.status != http.StatusOK {
		t.Fatalf("upload: %d %s", resp.status, resp.body)
	}
	var fi api.FileInfo
	if err := json.Unmarshal(resp.body, &fi); err != nil {
		t.Fatal(err)
	}
	if fi.Path != "/workspace/late.sh" || fi.Size != int64(len(content)) || fi.Mode != "0700" {
		t.Errorf("file info %+v", fi)
	}
	work, _ := e.rt.WorkDir(id)
	if b, err := os.ReadFile(filepath.Join(work, "late.sh")); err != nil || string(b) != content {
		t.Errorf("uploaded file: %d bytes, %v", len(b), err)
	}
}

// TestUploadPartsAfterFile: a streamed file part (its path known) is put
// in place only once the body's end shows nothing changes what was asked:
// a path, mode or second file part after it is 400, and nothing is
// written; other parts after it are dropped.
func TestUploadPartsAfterFile(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	work, _ := e.rt.WorkDir(id)
	for _, tt := range []struct {
		name  string
		query string
		parts []string
		want  int
	}{
		{"mode after", "", []string{"path", "f1", "file", "x", "mode", "0600"}, http.StatusBadRequest},
		{"second file", "", []string{"path", "f2", "file", "x", "file", "y"}, http.StatusBadRequest},
		{"path after, query path", "?path=f3", []string{"file", "x", "path", "other"}, http.StatusBadRequest},
		{"second file, the first before the path", "", []string{"file", "x", "path", "f5", "file", "y"}, http.StatusBadRequest},
		{"other part after", "", []string{"path", "f4", "file", "x", "note", "hi"}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctype, body := multipartBody(t, tt.parts...)
			resp := e.do(t, http.MethodPost, "/api/v1/sandboxes/"+id+"/files"+tt.query, ctype, body)
			if tt.want != http.StatusOK {
				checkError(t, resp, tt.want, api.CodeInvalidRequest)
				// The agent removes its temporary file once it sees the
				// body fail, which may be just after the answer.
				var left []string
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					entries, _ := os.ReadDir(work)
					left = left[:0]
					for _, de := range entries {
						if de.Name() != "f4" {
							left = append(left, de.Name())
						}
					}
					if len(left) == 0 || time.Now().After(deadline) {
						break
					}
				}
				if len(left) > 0 {
					t.Errorf("a refused upload left %v", left)
				}
				return
			}
			if resp.status != tt.want {
				t.Fatalf("upload: %d %s", resp.status, resp.body)
			}
			if b, err := os.ReadFile(filepath.Join(work, "f4")); err != nil || string(b) != "x" {
				t.Errorf("uploaded file: %q, %v", b, err)
			}
		})
	}
}

// A file part before its path is held on the host, so its size is bounded:
// past the bound the upload fails with 413 and leaves no spool file.
func TestUploadSpoolLimit(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	defer func(old int64) { maxSpoolBytes = old }(maxSpoolBytes)
	maxSpoolBytes = 1000
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "agent2env-upload-*"))
	ctype, body := multipartBody(t, "file", strings.Repeat("x", 1001), "path", "/workspace/big")
	checkError(t, e.do(t, http.MethodPost, "/api/v1/sandboxes/"+id+"/files", ctype, body), http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	ctype, body = multipartBody(t, "file", strings.Repeat("x", 1000), "path", "/workspace/fits")
	if resp := e.do(t, http.MethodPost, "/api/v1/sandboxes/"+id+"/files", ctype, body); resp.status != http.StatusOK {
		t.Errorf("upload at the limit: %d %s", resp.status, resp.body)
	}
	// With the path first nothing is spooled, so the bound does not apply.
	ctype, body = multipartBody(t, "path", "/workspace/streamed", "file", strings.Repeat("x", 5000))
	if resp := e.do(t, http.MethodPost, "/api/v1/sandboxes/"+id+"/files", ctype, body); resp.status != http.StatusOK {
		t.Errorf("streamed upload past the spool bound: %d %s", resp.status, resp.body)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "agent2env-upload-*"))
	if len(after) > len(before) {
		t.Errorf("spool files left: %v", after)
	}
}

func TestExecStream(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	resp := e.postJSON(t, "/api/v1/sandboxes/"+id+"/exec/stream", `{"command":["sh","-c","echo out; echo err >&2; exit 2"]}`)
	if resp.status != http.StatusOK || resp.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %v %s", resp.status, resp.header, resp.body)
	}
	events := readEvents(t, resp.body)
	if len(events) < 3 {
		t.Fatalf("events %+v", events)
	}
	output := map[string]string{}
	for _, ev := range events[:len(events)-1] {
		if ev.name != "stdout" && ev.name != "stderr" {
			t.Errorf("event %q before the end", ev.name)
			continue
		}
		checkKeys(t, ev.name+" event", []byte(ev.data), "type", "data")
		var ee api.ExecEvent
		if err := json.Unmarshal([]byte(ev.data), &ee); err != nil || ee.Type != ev.name {
			t.Errorf("event %s data %s: %v", ev.name, ev.data, err)
		}
		output[ev.name] += ee.Data
	}
	if diff := cmp.Diff(map[string]string{"stdout": "out\n", "stderr": "err\n"}, output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	last := events[len(events)-1]
	if last.name != "exit" {
		t.Fatalf("last event %+v, want exit", last)
	}
	checkKeys(t, "exit event", []byte(last.data), "type", "exit_code", "duration_ms")
	var exit api.ExecEvent
	if err := json.Unmarshal([]byte(last.data), &exit); err != nil || exit.Type != "exit" || exit.ExitCode != 2 {
		t.Errorf("exit event %s: %v", last.data, err)
	}

	// A timeout is reported in the exit event.
	resp = e.postJSON(t, "/api/v1/sandboxes/"+id+"/exec/stream", `{"command":["sleep","10"],"timeout":1}`)
	events = readEvents(t, resp.body)
	if len(events) != 1 || events[0].name != "exit" || !strings.Contains(events[0].data, `"timed_out":true`) {
		t.Errorf("timed out stream: %+v", events)
	}
}

// TestExecStreamIsStreamed checks that output reaches the client while the
// command still runs: the command waits for a file that the test creates
// only after it has read the first chunk.
func TestExecStreamIsStreamed(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	work, _ := e.rt.WorkDir(id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := `{"command":["sh","-c","echo first; while [ ! -e release ]; do sleep 0.01; done; echo second"]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/api/v1/sandboxes/"+id+"/exec/stream", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	ev, err := readEvent(br)
	if err != nil {
		t.Fatalf("first event: %v (was the output held back?)", err)
	}
	if ev.name != "stdout" || ev.data != `{"type":"stdout","data":"first\n"}` {
		t.Errorf("first event %+v", ev)
	}
	if err := os.WriteFile(filepath.Join(work, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		ev, err := readEvent(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, ev.name)
	}
	if diff := cmp.Diff([]string{"stdout", "exit"}, names); diff != "" {
		t.Errorf("later events (-want +got):\n%s", diff)
	}
}

// TestBadInput sends bad requests to every endpoint: each gets the error
// body with the expected status and code, and nothing is created.
func TestBadInput(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	work, _ := e.rt.WorkDir(id)
	if err := os.Mkdir(filepath.Join(work, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	before, beforeRT := e.ids(t), e.rt.IDs()

	const (
		jsonCT = "application/json"
		bad    = http.StatusBadRequest
		inv    = api.CodeInvalidRequest
	)
	huge := `{"image":"` + strings.Repeat("a", maxJSONBody) + `"}`
	hugeExec := `{"command":["echo","` + strings.Repeat("a", maxJSONBody) + `"]}`
	sbPath := "/api/v1/sandboxes"
	execPaths := []string{sbPath + "/" + id + "/exec", sbPath + "/" + id + "/exec/stream"}
	filesPath := sbPath + "/" + id + "/files"

	type tc struct {
		name   string
		method string
		path   string
		ctype  string
		body   string
		status int
		code   string
	}
	tests := []tc{
		{name: "create malformed", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":`, status: bad, code: inv},
		{name: "create not JSON", method: "POST", path: sbPath, ctype: jsonCT, body: `image=alpine`, status: bad, code: inv},
		{name: "create wrong type image", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":5}`, status: bad, code: inv},
		{name: "create wrong type ttl", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","ttl":"60"}`, status: bad, code: inv},
		{name: "create fractional ttl", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","ttl":1.5}`, status: bad, code: inv},
		{name: "create ttl overflows", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","ttl":99999999999999999999}`, status: bad, code: inv},
		{name: "create ttl overflows a duration", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","ttl":9223372036854775807}`, status: bad, code: inv},
		{name: "create wrong type env", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","env":["A=1"]}`, status: bad, code: inv},
		{name: "create env value not string", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","env":{"A":1}}`, status: bad, code: inv},
		{name: "create empty body", method: "POST", path: sbPath, ctype: jsonCT, body: ``, status: bad, code: inv},
		{name: "create whitespace body", method: "POST", path: sbPath, ctype: jsonCT, body: " \n", status: bad, code: inv},
		{name: "create null", method: "POST", path: sbPath, ctype: jsonCT, body: `null`, status: bad, code: inv},
		{name: "create array", method: "POST", path: sbPath, ctype: jsonCT, body: `[{"image":"alpine"}]`, status: bad, code: inv},
		{name: "create trailing object", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine"} {}`, status: bad, code: inv},
		{name: "create trailing brace", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine"}}`, status: bad, code: inv},
		{name: "create trailing bracket", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine"}]`, status: bad, code: inv},
		{name: "create trailing garbage", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine"}x`, status: bad, code: inv},
		{name: "create wrong content type", method: "POST", path: sbPath, ctype: "text/plain", body: `{"image":"alpine"}`, status: http.StatusUnsupportedMediaType, code: api.CodeUnsupportedMediaType},
		{name: "create form content type", method: "POST", path: sbPath, ctype: "application/x-www-form-urlencoded", body: `{"image":"alpine"}`, status: http.StatusUnsupportedMediaType, code: api.CodeUnsupportedMediaType},
		{name: "create too large", method: "POST", path: sbPath, ctype: jsonCT, body: huge, status: http.StatusRequestEntityTooLarge, code: api.CodeTooLarge},
		{name: "create too large after the value", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine"}` + strings.Repeat(" ", maxJSONBody), status: http.StatusRequestEntityTooLarge, code: api.CodeTooLarge},
		{name: "create no image", method: "POST", path: sbPath, ctype: jsonCT, body: `{}`, status: bad, code: inv},
		{name: "create bad ref", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"Not A Ref!"}`, status: bad, code: inv},
		{name: "create bad cpu", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","cpu":"-1"}`, status: bad, code: inv},
		{name: "create bad memory", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","memory":"1Ki"}`, status: bad, code: inv},
		{name: "create negative ttl", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","ttl":-5}`, status: bad, code: inv},
		{name: "create bad env", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","env":{"A=B":"c"}}`, status: bad, code: inv},
		{name: "create NUL env", method: "POST", path: sbPath, ctype: jsonCT, body: `{"image":"alpine","env":{"A":"\u0000"}}`, status: bad, code: inv},
		{name: "create template", method: "POST", path: sbPath, ctype: jsonCT, body: `{"template":"python"}`, status: http.StatusNotFound, code: "TEMPLATE_NOT_FOUND"},

		{name: "get unknown", method: "GET", path: sbPath + "/nosuchsandbox", status: http.StatusNotFound, code: api.CodeSandboxNotFound},
		{name: "delete unknown", method: "DELETE", path: sbPath + "/nosuchsandbox", status: http.StatusNotFound, code: api.CodeSandboxNotFound},
		{name: "logs unknown", method: "GET", path: sbPath + "/nosuchsandbox/logs", status: http.StatusNotFound, code: api.CodeSandboxNotFound},
		{name: "exec unknown", method: "POST", path: sbPath + "/nosuchsandbox/exec", ctype: jsonCT, body: `{"command":["true"]}`, status: http.StatusNotFound, code: api.CodeSandboxNotFound},
		{name: "stream unknown", method: "POST", path: sbPath + "/nosuchsandbox/exec/stream", ctype: jsonCT, body: `{"command":["true"]}`, status: http.StatusNotFound, code: api.CodeSandboxNotFound},
		{name: "stream missing cwd", method: "POST", path: sbPath + "/" + id + "/exec/stream", ctype: jsonCT, body: `{"command":["true"],"cwd":"/nowhere"}`, status: bad, code: inv},
		{name: "download unknown", method: "GET", path: sbPath + "/nosuchsandbox/files?path=f", status: http.StatusNotFound, code: api.CodeSandboxNotFound},

		{name: "download no path", method: "GET", path: filesPath, status: bad, code: inv},
		{name: "download traversal", method: "GET", path: filesPath + "?path=../../etc/passwd", status: bad, code: inv},
		{name: "download absolute traversal", method: "GET", path: filesPath + "?path=/workspace/../etc/passwd", status: bad, code: inv},
		{name: "download NUL", method: "GET", path: filesPath + "?path=a%00b", status: bad, code: inv},
		{name: "download missing", method: "GET", path: filesPath + "?path=nope.txt", status: http.StatusNotFound, code: api.CodeFileNotFound},
		{name: "download directory", method: "GET", path: filesPath + "?path=dir", status: bad, code: inv},

		{name: "unknown route", method: "GET", path: "/api/v1/nothing", status: http.StatusNotFound, code: api.CodeNotFound},
		{name: "unknown sandbox subroute", method: "GET", path: sbPath + "/" + id + "/nothing", status: http.StatusNotFound, code: api.CodeNotFound},
		{name: "root", method: "GET", path: "/", status: http.StatusNotFound, code: api.CodeNotFound},
		{name: "wrong method", method: "PUT", path: sbPath, ctype: jsonCT, body: `{}`, status: http.StatusNotFound, code: api.CodeNotFound},
		// The stream has begun by then: it ends with an error event.
		{name: "exec cwd missing", method: "POST", path: execPaths[0], ctype: jsonCT, body: `{"command":["true"],"cwd":"no/such/dir"}`, status: bad, code: inv},
	}
	for _, p := range execPaths {
		kind := "exec"
		if strings.HasSuffix(p, "stream") {
			kind = "stream"
		}
		for _, c := range []tc{
			{name: "malformed", ctype: jsonCT, body: `{"command":["echo"`, status: bad, code: inv},
			{name: "wrong type command", ctype: jsonCT, body: `{"command":"echo hi"}`, status: bad, code: inv},
			{name: "wrong type timeout", ctype: jsonCT, body: `{"command":["true"],"timeout":"5s"}`, status: bad, code: inv},
			{name: "wrong type stdin", ctype: jsonCT, body: `{"command":["cat"],"stdin":["x"]}`, status: bad, code: inv},
			{name: "empty body", ctype: jsonCT, body: ``, status: bad, code: inv},
			{name: "trailing data", ctype: jsonCT, body: `{"command":["true"]}{"command":["true"]}`, status: bad, code: inv},
			{name: "trailing bracket", ctype: jsonCT, body: `{"command":["true"]}]`, status: bad, code: inv},
			{name: "wrong content type", ctype: "text/plain", body: `{"command":["true"]}`, status: http.StatusUnsupportedMediaType, code: api.CodeUnsupportedMediaType},
			{name: "too large", ctype: jsonCT, body: hugeExec, status: http.StatusRequestEntityTooLarge, code: api.CodeTooLarge},
			{name: "no command", ctype: jsonCT, body: `{}`, status: bad, code: inv},
			{name: "empty command", ctype: jsonCT, body: `{"command":[]}`, status: bad, code: inv},
			{name: "empty argv0", ctype: jsonCT, body: `{"command":[""]}`, status: bad, code: inv},
			{name: "NUL argument", ctype: jsonCT, body: `{"command":["echo","a\u0000b"]}`, status: bad, code: inv},
			{name: "negative timeout", ctype: jsonCT, body: `{"command":["true"],"timeout":-1}`, status: bad, code: inv},
			{name: "timeout too long", ctype: jsonCT, body: `{"command":["true"],"timeout":86401}`, status: bad, code: inv},
			// 2^64/1e9 + 1 seconds wraps around to 1 s as a time.Duration.
			{name: "timeout overflowing", ctype: jsonCT, body: `{"command":["true"],"timeout":18446744074}`, status: bad, code: inv},
			{name: "bad env", ctype: jsonCT, body: `{"command":["true"],"env":{"":"x"}}`, status: bad, code: inv},
			{name: "cwd traversal", ctype: jsonCT, body: `{"command":["true"],"cwd":"../.."}`, status: bad, code: inv},
			{name: "cwd NUL", ctype: jsonCT, body: `{"command":["true"],"cwd":"a\u0000"}`, status: bad, code: inv},
		} {
			c.name, c.method, c.path = kind+" "+c.name, "POST", p
			tests = append(tests, c)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			checkError(t, e.do(t, tt.method, tt.path, tt.ctype, body), tt.status, tt.code)
		})
	}

	uploads := []struct {
		name   string
		url    string // the files path of the sandbox when empty
		body   func() (string, io.Reader)
		status int
		code   string
	}{
		{name: "not multipart", body: func() (string, io.Reader) { return jsonCT, strings.NewReader(`{"path":"f"}`) }, status: http.StatusUnsupportedMediaType, code: api.CodeUnsupportedMediaType},
		{name: "no content type", body: func() (string, io.Reader) { return "", strings.NewReader("x") }, status: http.StatusUnsupportedMediaType, code: api.CodeUnsupportedMediaType},
		{name: "multipart without boundary", body: func() (string, io.Reader) { return "multipart/form-data", strings.NewReader("x") }, status: bad, code: inv},
		{name: "empty multipart", body: func() (string, io.Reader) { return multipartBody(t) }, status: bad, code: inv},
		{name: "no file part", body: func() (string, io.Reader) { return multipartBody(t, "path", "f") }, status: bad, code: inv},
		{name: "no path", body: func() (string, io.Reader) { return multipartBody(t, "file", "x") }, status: bad, code: inv},
		{name: "empty path", body: func() (string, io.Reader) { return multipartBody(t, "path", "", "file", "x") }, status: bad, code: inv},
		{name: "traversal", body: func() (string, io.Reader) { return multipartBody(t, "path", "../escape", "file", "x") }, status: bad, code: inv},
		{name: "absolute traversal", body: func() (string, io.Reader) { return multipartBody(t, "path", "/workspace/../../escape", "file", "x") }, status: bad, code: inv},
		{name: "traversal after file", body: func() (string, io.Reader) { return multipartBody(t, "file", "x", "path", "../escape") }, status: bad, code: inv},
		{name: "traversal in query", url: filesPath + "?path=../escape", body: func() (string, io.Reader) { return multipartBody(t, "file", "x") }, status: bad, code: inv},
		{name: "NUL path", body: func() (string, io.Reader) { return multipartBody(t, "path", "a\x00b", "file", "x") }, status: bad, code: inv},
		{name: "path too long", body: func() (string, io.Reader) { return multipartBody(t, "path", strings.Repeat("a", 5000), "file", "x") }, status: bad, code: inv},
		{name: "bad mode", body: func() (string, io.Reader) { return multipartBody(t, "mode", "rwx", "path", "f", "file", "x") }, status: bad, code: inv},
		{name: "mode too big", body: func() (string, io.Reader) { return multipartBody(t, "mode", "7777", "path", "f", "file", "x") }, status: bad, code: inv},
		{name: "mode too long", body: func() (string, io.Reader) {
			return multipartBody(t, "mode", "0000000000000000644", "path", "f", "file", "x")
		}, status: bad, code: inv},
		{name: "two spooled files", body: func() (string, io.Reader) { return multipartBody(t, "file", "x", "file", "y", "path", "f") }, status: bad, code: inv},
		{name: "over a directory", body: func() (string, io.Reader) { return multipartBody(t, "path", "dir", "file", "x") }, status: bad, code: inv},
		{name: "truncated", body: func() (string, io.Reader) {
			ct, b := multipartBody(t, "path", "f", "file", "x")
			return ct, strings.NewReader(b.String()[:b.Len()/2])
		}, status: bad, code: inv},
		{name: "truncated spooled", body: func() (string, io.Reader) {
			ct, b := multipartBody(t, "file", strings.Repeat("x", 1000), "path", "f")
			return ct, strings.NewReader(b.String()[:b.Len()/2])
		}, status: bad, code: inv},
		{name: "unknown sandbox", url: sbPath + "/nosuchsandbox/files", body: func() (string, io.Reader) { return multipartBody(t, "path", "f", "file", "x") },
			status: http.StatusNotFound, code: api.CodeSandboxNotFound},
	}
	for _, tt := range uploads {
		t.Run("upload "+tt.name, func(t *testing.T) {
			ctype, body := tt.body()
			u := tt.url
			if u == "" {
				u = filesPath
			}
			checkError(t, e.do(t, http.MethodPost, u, ctype, body), tt.status, tt.code)
		})
	}

	if diff := cmp.Diff(before, e.ids(t)); diff != "" {
		t.Errorf("sandboxes changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeRT, e.rt.IDs()); diff != "" {
		t.Errorf("runtime sandboxes changed (-before +after):\n%s", diff)
	}
	for _, name := range []string{"f", "escape"} {
		if _, err := os.Stat(filepath.Join(work, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("bad upload left %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(work), "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("upload escaped the workspace: %v", err)
	}
}

func TestRecoverPanics(t *testing.T) {
	s := New(nil, nil, slog.New(slog.DiscardHandler))
	h := s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	checkError(t, response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, http.StatusInternalServerError, api.CodeInternal)
}

// The optional metadata (agent2env addition) is kept at create and shown
// by get and list; a sandbox without has no metadata key (the LiteBoxd
// view is unchanged); out-of-bounds metadata is 400.
func TestSandboxMetadata(t *testing.T) {
	e := newEnv(t, envOptions{})
	sb := e.createSandbox(t, `{"image":"alpine","metadata":{"team":"ml","tier":"gold"}}`)
	if fmt.Sprint(sb.Metadata) != "map[team:ml tier:gold]" {
		t.Errorf("created with metadata %v", sb.Metadata)
	}
	resp := e.do(t, http.MethodGet, "/api/v1/sandboxes/"+sb.ID, "", nil)
	if resp.status != http.StatusOK || !strings.Contains(string(resp.body), `"metadata":{"team":"ml","tier":"gold"}`) {
		t.Errorf("get: %d %s", resp.status, resp.body)
	}
	plain := e.createSandbox(t, `{"image":"alpine"}`)
	resp = e.do(t, http.MethodGet, "/api/v1/sandboxes/"+plain.ID, "", nil)
	if strings.Contains(string(resp.body), "metadata") {
		t.Errorf("a sandbox without metadata shows it: %s", resp.body)
	}
	if resp := e.postJSON(t, "/api/v1/sandboxes", `{"image":"alpine","metadata":{"":"v"}}`); resp.status != http.StatusBadRequest {
		t.Errorf("empty metadata key: %d %s", resp.status, resp.body)
	}
	if resp := e.postJSON(t, "/api/v1/sandboxes", `{"image":"alpine","metadata":{"k":1}}`); resp.status != http.StatusBadRequest {
		t.Errorf("metadata value not a string: %d %s", resp.status, resp.body)
	}
}

// TestListSandboxStatus lists the sandboxes of some statuses, paged: the
// page holds only those, and a status the API does not know is refused.
func TestListSandboxStatus(t *testing.T) {
	e := newEnv(t, envOptions{})
	var running, stopped []string
	for i := range 5 {
		sb := e.createSandbox(t, `{"image":"alpine"}`)
		waitStatus(t, e, sb.ID, is(api.StatusRunning))
		if i%2 == 1 {
			resp := e.do(t, http.MethodPost, "/api/v1/sandboxes/"+sb.ID+"/stop", "", nil)
			if resp.status != http.StatusOK {
				t.Fatalf("stop: %d %s", resp.status, resp.body)
			}
			stopped = append(stopped, sb.ID)
			continue
		}
		running = append(running, sb.ID)
	}
	stoppedStatus := waitStatus(t, e, stopped[0], func(st api.SandboxStatus) bool { return st != api.StatusRunning })
	for _, id := range stopped[1:] {
		waitStatus(t, e, id, is(stoppedStatus))
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"status=running", running},
		{"status=" + string(stoppedStatus), stopped},
		{"status=running," + string(stoppedStatus), e.ids(t)},
		{"status=running&status=" + string(stoppedStatus), e.ids(t)},
		{"status=failed", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			var got []string
			for query := "?limit=1&" + tt.query; ; {
				resp := e.do(t, http.MethodGet, "/api/v1/sandboxes"+query, "", nil)
				if resp.status != http.StatusOK {
					t.Fatalf("list %s: %d %s", query, resp.status, resp.body)
				}
				l := decodeInto[api.SandboxList](t, resp)
				for _, sb := range l.Items {
					got = append(got, sb.ID)
				}
				if l.NextCursor == "" {
					break
				}
				query = "?limit=1&" + tt.query + "&cursor=" + url.QueryEscape(l.NextCursor)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
	for _, query := range []string{"?status=stopped", "?status=", "?status=running,", "?status=RUNNING"} {
		checkError(t, e.do(t, http.MethodGet, "/api/v1/sandboxes"+query, "", nil), http.StatusBadRequest, api.CodeInvalidRequest)
	}
}

// waitStatus waits until sandbox id has a status ok takes, and returns it.
func waitStatus(t *testing.T, e *env, id string, ok func(api.SandboxStatus) bool) api.SandboxStatus {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var sb api.Sandbox
		if err := json.Unmarshal(e.do(t, http.MethodGet, "/api/v1/sandboxes/"+id, "", nil).body, &sb); err != nil {
			t.Fatal(err)
		}
		if ok(sb.Status) {
			return sb.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s stays %s (%s)", id, sb.Status, sb.Reason)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func is(want api.SandboxStatus) func(api.SandboxStatus) bool {
	return func(st api.SandboxStatus) bool { return st == want }
}
