package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/prepull"
	"github.com/agent2env/agent2env/internal/prepull/prepulltest"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// prepullEnv is the API with the prepull routes on a real prepull
// service, a sqlite store and fake images; the image routes run on
// newFakeImages("alpine").
type prepullEnv struct {
	h      http.Handler
	svc    *prepull.Service
	pulls  *prepulltest.Images
	images *fakeImages
}

// prepullTemplates resolves templates from a map of name to image.
type prepullTemplates map[string]string

func (pt prepullTemplates) Resolve(ctx context.Context, name string, version int) (api.TemplateSpec, int, error) {
	img, ok := pt[name]
	if !ok {
		return api.TemplateSpec{}, 0, errdefs.WithCode(errdefs.NotFound("template '%s' not found", name), "TEMPLATE_NOT_FOUND")
	}
	return api.TemplateSpec{Image: img}, 1, nil
}

func openPrepullEnv(dir string, opts ...Option) (*prepullEnv, func(), error) {
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.DiscardHandler)
	pulls := prepulltest.NewImages()
	svc := prepull.New(st, pulls, log, prepull.WithTemplates(prepullTemplates{"py": "python:3.12", "noimage": ""}))
	imgs := newFakeImages("alpine")
	srv := New(nil, service.NewImages(imgs), log, append(opts, WithRoutes(NewPrepullRoutes(svc)))...)
	srv.SetReady(true)
	return &prepullEnv{h: srv.Handler(), svc: svc, pulls: pulls, images: imgs}, func() {
		svc.Close()
		st.Close()
	}, nil
}

func newPrepullEnv(t *testing.T, opts ...Option) *prepullEnv {
	t.Helper()
	e, closeEnv, err := openPrepullEnv(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeEnv)
	return e
}

func (e *prepullEnv) do(t *testing.T, method, target, body string) response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func decodeTask(t *testing.T, resp response) api.PrepullTask {
	t.Helper()
	var task api.PrepullTask
	if err := json.Unmarshal(resp.body, &task); err != nil {
		t.Fatalf("task %s: %v", resp.body, err)
	}
	return task
}

// waitTask polls GET /images/prepull/{id} until the task has status.
func (e *prepullEnv) waitTask(t *testing.T, id, status string) response {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := e.do(t, http.MethodGet, "/api/v1/images/prepull/"+id, "")
		if resp.status != http.StatusOK {
			t.Fatalf("get %s: %d %s", id, resp.status, resp.body)
		}
		if decodeTask(t, resp).Status == status {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never became %s: %s", id, status, resp.body)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (e *prepullEnv) listIDs(t *testing.T, query string) []string {
	t.Helper()
	resp := e.do(t, http.MethodGet, "/api/v1/images/prepull"+query, "")
	if resp.status != http.StatusOK {
		t.Fatalf("list %s: %d %s", query, resp.status, resp.body)
	}
	checkKeys(t, "list", resp.body, "items")
	var list struct {
		Items []api.PrepullTask `json:"items"`
	}
	if err := json.Unmarshal(resp.body, &list); err != nil || list.Items == nil {
		t.Fatalf("list %s: %s is not {items: [...]}: %v", query, resp.body, err)
	}
	ids := []string{}
	for _, task := range list.Items {
		ids = append(ids, task.ID)
	}
	return ids
}

func TestPrepullRoutes(t *testing.T) {
	e := newPrepullEnv(t)
	pull := e.pulls.Hold("python:3.12")

	resp := e.do(t, http.MethodPost, "/api/v1/images/prepull", `{"image":" python:3.12 ","timeout":60}`)
	if resp.status != http.StatusAccepted || resp.header.Get("Content-Type") != "application/json" {
		t.Fatalf("create: %d %v %s", resp.status, resp.header, resp.body)
	}
	checkKeys(t, "created task", resp.body, "id", "image", "status", "progress", "startedAt")
	var raw struct {
		Progress  json.RawMessage `json:"progress"`
		StartedAt string          `json:"startedAt"`
	}
	json.Unmarshal(resp.body, &raw)
	checkKeys(t, "progress", raw.Progress, "ready", "total")
	if _, err := time.Parse(time.RFC3339Nano, raw.StartedAt); err != nil || !strings.HasSuffix(raw.StartedAt, "Z") {
		t.Errorf("startedAt %q is not RFC 3339 UTC: %v", raw.StartedAt, err)
	}
	task := decodeTask(t, resp)
	if task.Image != "python:3.12" || task.Status != api.PrepullPending || !strings.HasPrefix(task.ID, "pp-") {
		t.Errorf("created task %+v", task)
	}

	// The SDKs poll GET /images/prepull/{id}.
	resp = e.do(t, http.MethodGet, "/api/v1/images/prepull/"+task.ID, "")
	if resp.status != http.StatusOK {
		t.Fatalf("get: %d %s", resp.status, resp.body)
	}
	if diff := cmp.Diff(task, decodeTask(t, resp)); diff != "" {
		t.Errorf("get (-created +got):\n%s", diff)
	}

	select {
	case <-pull.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("pull never started")
	}
	pull.Emit(image.Progress{Phase: image.PhaseDownload, Item: "sha256:a", Total: 10})
	resp = e.waitTask(t, task.ID, api.PrepullPulling)
	if got := decodeTask(t, resp).Progress; got != (api.PrepullProgress{Ready: 0, Total: 1}) {
		t.Errorf("pulling progress %+v", got)
	}
	pull.Finish(nil)
	resp = e.waitTask(t, task.ID, api.PrepullCompleted)
	checkKeys(t, "completed task", resp.body, "id", "image", "status", "progress", "startedAt", "completedAt")
	if got := decodeTask(t, resp); got.Progress != (api.PrepullProgress{Ready: 1, Total: 1}) || got.CompletedAt == nil {
		t.Errorf("completed task %+v", got)
	}

	// A failed pull says why.
	resp = e.do(t, http.MethodPost, "/api/v1/images/prepull", `{"image":"missing:1"}`)
	if resp.status != http.StatusAccepted {
		t.Fatalf("create missing: %d %s", resp.status, resp.body)
	}
	failed := decodeTask(t, resp)
	resp = e.waitTask(t, failed.ID, api.PrepullFailed)
	checkKeys(t, "failed task", resp.body, "id", "image", "status", "progress", "error", "startedAt", "completedAt")

	// Delete answers 204 without a body, and the task is gone.
	resp = e.do(t, http.MethodDelete, "/api/v1/images/prepull/"+task.ID, "")
	if resp.status != http.StatusNoContent || len(resp.body) != 0 {
		t.Errorf("delete: %d %q", resp.status, resp.body)
	}
	checkError(t, e.do(t, http.MethodGet, "/api/v1/images/prepull/"+task.ID, ""), http.StatusNotFound, api.CodePrepullNotFound)
	checkError(t, e.do(t, http.MethodDelete, "/api/v1/images/prepull/"+task.ID, ""), http.StatusNotFound, api.CodePrepullNotFound)
}

func TestPrepullConflict(t *testing.T) {
	e := newPrepullEnv(t)
	e.pulls.Hold("python:3.12")
	resp := e.do(t, http.MethodPost, "/api/v1/images/prepull", `{"image":"python:3.12"}`)
	if resp.status != http.StatusAccepted {
		t.Fatalf("create: %d %s", resp.status, resp.body)
	}
	id := decodeTask(t, resp).ID
	for _, body := range []string{`{"image":"python:3.12"}`, `{"image":"docker.io/library/python:3.12","timeout":5}`} {
		resp = e.do(t, http.MethodPost, "/api/v1/images/prepull", body)
		checkError(t, resp, http.StatusConflict, api.CodePrepullInProgress)
		if !bytes.Contains(resp.body, []byte(id)) {
			t.Errorf("conflict %s does not name %s", resp.body, id)
		}
	}
	// So is the template route, which prepulls the same image.
	checkError(t, e.do(t, http.MethodPost, "/api/v1/templates/py/prepull", ""), http.StatusConflict, api.CodePrepullInProgress)
	if ids := e.listIDs(t, ""); len(ids) != 1 {
		t.Errorf("tasks %v, want only %s", ids, id)
	}
	// Deleting the active task cancels it and frees the image.
	resp = e.do(t, http.MethodDelete, "/api/v1/images/prepull/"+id, "")
	if resp.status != http.StatusNoContent {
		t.Fatalf("delete active: %d %s", resp.status, resp.body)
	}
	if resp := e.do(t, http.MethodPost, "/api/v1/images/prepull", `{"image":"python:3.12"}`); resp.status != http.StatusAccepted {
		t.Errorf("create after delete: %d %s", resp.status, resp.body)
	}
}

func TestPrepullBadInput(t *testing.T) {
	e := newPrepullEnv(t)
	const path = "/api/v1/images/prepull"
	tests := []struct {
		name   string
		ctype  string
		body   string
		status int
		code   string
	}{
		{"empty body", "application/json", "", http.StatusBadRequest, api.CodeInvalidRequest},
		{"empty object", "application/json", `{}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"null", "application/json", `null`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"empty image", "application/json", `{"image":""}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"blank image", "application/json", `{"image":" \t"}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"bad reference", "application/json", `{"image":"Not A Ref!"}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"image not a string", "application/json", `{"image":["alpine"]}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"negative timeout", "application/json", `{"image":"alpine","timeout":-1}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"huge negative timeout", "application/json", `{"image":"alpine","timeout":-9223372036854775808}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"fractional timeout", "application/json", `{"image":"alpine","timeout":1.5}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"string timeout", "application/json", `{"image":"alpine","timeout":"60"}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"overflowing timeout", "application/json", `{"image":"alpine","timeout":1e30}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"bad JSON", "application/json", `{"image":`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"trailing data", "application/json", `{"image":"alpine"} {}`, http.StatusBadRequest, api.CodeInvalidRequest},
		{"not JSON", "text/plain", `{"image":"alpine"}`, http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType},
		{"too large", "application/json", `{"image":"alpine","x":"` + strings.Repeat("a", maxJSONBody) + `"}`, http.StatusRequestEntityTooLarge, api.CodeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.ctype)
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			checkError(t, response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, tt.status, tt.code)
		})
	}
	if ids := e.listIDs(t, ""); len(ids) != 0 || e.pulls.Calls() != 0 {
		t.Errorf("bad requests left tasks %v and %d pulls", ids, e.pulls.Calls())
	}
	// A huge timeout is capped, not refused; unknown fields are ignored.
	if resp := e.do(t, http.MethodPost, path, `{"image":"alpine","timeout":9223372036854775807,"extra":1}`); resp.status != http.StatusAccepted {
		t.Errorf("huge timeout: %d %s", resp.status, resp.body)
	}
}

func TestPrepullList(t *testing.T) {
	e := newPrepullEnv(t)
	if ids := e.listIDs(t, ""); len(ids) != 0 {
		t.Fatalf("empty list %v", ids)
	}
	create := func(body string) string {
		t.Helper()
		resp := e.do(t, http.MethodPost, "/api/v1/images/prepull", body)
		if resp.status != http.StatusAccepted {
			t.Fatalf("create %s: %d %s", body, resp.status, resp.body)
		}
		time.Sleep(time.Millisecond) // distinct startedAt
		return decodeTask(t, resp).ID
	}
	alpine := create(`{"image":"alpine"}`)
	e.waitTask(t, alpine, api.PrepullCompleted)
	missing := create(`{"image":"missing"}`)
	e.waitTask(t, missing, api.PrepullFailed)
	e.pulls.Hold("python:3.12")
	python := create(`{"image":"python:3.12"}`)

	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{python, missing, alpine}},
		{"?image=alpine", []string{alpine}},
		{"?image=docker.io%2Flibrary%2Falpine%3Alatest", []string{alpine}},
		{"?status=failed", []string{missing}},
		{"?status=pending", []string{python}},
		{"?image=python:3.12&status=pending", []string{python}},
		{"?image=alpine&status=failed", []string{}},
		{"?image=Not+A+Ref", []string{}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, e.listIDs(t, tt.query)); diff != "" {
			t.Errorf("list %s (-want +got):\n%s", tt.query, diff)
		}
	}
	// status is the enum PrepullStatus: another is a 400 naming its values.
	for _, query := range []string{"?status=bogus", "?status=Failed", "?image=alpine&status=done"} {
		resp := e.do(t, http.MethodGet, "/api/v1/images/prepull"+query, "")
		checkError(t, resp, http.StatusBadRequest, api.CodeInvalidRequest)
		if !strings.Contains(string(resp.body), "pending, pulling, completed, failed") {
			t.Errorf("list %s: %s does not name the statuses", query, resp.body)
		}
	}
}

// TestPrepullListPages pages the prepull tasks: newest first unless
// order=asc, limit and cursor as the other lists take them.
func TestPrepullListPages(t *testing.T) {
	e := newPrepullEnv(t)
	var oldest []string
	for _, img := range []string{"alpine", "missing", "python:3.12"} {
		resp := e.do(t, http.MethodPost, "/api/v1/images/prepull", `{"image":"`+img+`"}`)
		if resp.status != http.StatusAccepted {
			t.Fatalf("create %s: %d %s", img, resp.status, resp.body)
		}
		oldest = append(oldest, decodeTask(t, resp).ID)
		time.Sleep(time.Millisecond) // distinct startedAt
	}
	newest := slices.Clone(oldest)
	slices.Reverse(newest)
	get := func(target string) (int, []byte) {
		resp := e.do(t, http.MethodGet, target, "")
		return resp.status, resp.body
	}
	checkPages(t, "/api/v1/images/prepull", []pageCase{
		{"", newest, 1}, {"?order=asc", oldest, 1}, {"?limit=2", newest, 2}, {"?limit=1&order=asc", oldest, 3},
		{"?image=alpine&limit=1", oldest[:1], 1},
	}, get, pageIDs(func(l *api.PrepullList) ([]string, string) {
		var ids []string
		for _, task := range l.Items {
			ids = append(ids, task.ID)
		}
		return ids, l.NextCursor
	}))
}

func TestTemplatePrepull(t *testing.T) {
	e := newPrepullEnv(t)
	e.pulls.Hold("python:3.12")
	// No body is read: whatever comes is ignored.
	resp := e.do(t, http.MethodPost, "/api/v1/templates/py/prepull", `{"image":"ignored`)
	if resp.status != http.StatusAccepted {
		t.Fatalf("template prepull: %d %s", resp.status, resp.body)
	}
	checkKeys(t, "template task", resp.body, "id", "image", "status", "progress", "template", "startedAt")
	if task := decodeTask(t, resp); task.Template != "py" || task.Image != "python:3.12" {
		t.Errorf("template task %+v", task)
	}
	checkError(t, e.do(t, http.MethodPost, "/api/v1/templates/nope/prepull", ""), http.StatusNotFound, "TEMPLATE_NOT_FOUND")
	resp = e.do(t, http.MethodPost, "/api/v1/templates/noimage/prepull", "")
	checkError(t, resp, http.StatusBadRequest, api.CodeInvalidRequest)
	if !bytes.Contains(resp.body, []byte("Template has no image configured")) {
		t.Errorf("no-image error %s", resp.body)
	}
}

// The prepull routes share /api/v1/images/ with image removal: each path
// must reach its own handler.
func TestPrepullRouteResolution(t *testing.T) {
	e := newPrepullEnv(t)
	tests := []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"delete unknown task", http.MethodDelete, "/api/v1/images/prepull/pp-00000000", http.StatusNotFound, api.CodePrepullNotFound},
		{"get unknown task", http.MethodGet, "/api/v1/images/prepull/pp-00000000", http.StatusNotFound, api.CodePrepullNotFound},
		{"delete image", http.MethodDelete, "/api/v1/images/alpine", http.StatusNoContent, ""},
		{"delete nested image ref", http.MethodDelete, "/api/v1/images/ghcr.io/acme/tool:1", http.StatusNotFound, api.CodeImageNotFound},
		{"delete image named prepull", http.MethodDelete, "/api/v1/images/prepull", http.StatusNotFound, api.CodeImageNotFound},
		{"delete deeper under prepull", http.MethodDelete, "/api/v1/images/prepull/a/b", http.StatusNotFound, api.CodeImageNotFound},
		{"wrong method", http.MethodPut, "/api/v1/images/prepull/pp-00000000", http.StatusNotFound, api.CodeNotFound},
		{"list images", http.MethodGet, "/api/v1/images", http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.do(t, tt.method, tt.path, "")
			if tt.code != "" {
				checkError(t, resp, tt.status, tt.code)
			} else if resp.status != tt.status {
				t.Errorf("%d %s, want %d", resp.status, resp.body, tt.status)
			}
		})
	}
	if _, err := e.images.Get(context.Background(), "alpine"); err == nil {
		t.Error("DELETE /api/v1/images/alpine did not reach image removal")
	}
}

var prepullSeeds = []string{
	`{"image":"alpine"}`,
	`{"image":"alpine","timeout":600}`,
	`{"image":" docker.io/library/python:3.12 ","timeout":1}`,
	`{"image":"agent2env/python"}`,
	`{"image":"ghcr.io/acme/tool@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`,
	`{"image":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`,
	`{"image":"missing:1"}`,
	`{"image":"alpine","timeout":-1}`,
	`{"image":"alpine","timeout":9223372036854775807}`,
	`{"image":"alpine","timeout":1e3}`,
	`{"image":"Not A Ref!"}`,
	`{"image":"a\u0000b"}`,
	`{"image":""}`,
	`{"image":null}`,
	`{"timeout":5}`,
	`{"image":"alpine"}]`,
	`{"image":`,
	`null`,
	`[]`,
	``,
	"\xff\xfe",
}

// FuzzPrepullRequest fuzzes the body of POST /images/prepull: no 5xx, an
// error body on every 4xx, nothing recorded for a refused request, and an
// accepted one is the task asked for.
func FuzzPrepullRequest(f *testing.F) {
	for _, s := range prepullSeeds {
		f.Add([]byte(s))
	}
	e, closeEnv, err := openPrepullEnv(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(closeEnv)
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := context.Background()
		before, err := e.svc.List(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		rec := serve(t, e.h, "/api/v1/images/prepull", body)
		after, err := e.svc.List(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Code >= 300 {
			if len(after) != len(before) {
				t.Fatalf("refused %q (%d) but recorded a task", body, rec.Code)
			}
			return
		}
		if rec.Code != http.StatusAccepted {
			t.Fatalf("create %q: %d %s", body, rec.Code, rec.Body)
		}
		var req api.PrepullRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("accepted %q, which is not a request: %v", body, err)
		}
		var task api.PrepullTask
		if err := json.Unmarshal(rec.Body.Bytes(), &task); err != nil {
			t.Fatalf("create %q answered %s: %v", body, rec.Body, err)
		}
		if !strings.HasPrefix(task.ID, "pp-") || task.Image != strings.TrimSpace(req.Image) || task.Status != api.PrepullPending || len(after) != len(before)+1 {
			t.Fatalf("create %q: task %+v, %d tasks before, %d after", body, task, len(before), len(after))
		}
		if err := e.svc.Delete(ctx, task.ID); err != nil {
			t.Fatalf("delete %s: %v", task.ID, err)
		}
	})
}
