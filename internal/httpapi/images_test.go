package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/image"
)

func TestImageRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})

	resp := e.do(t, http.MethodGet, "/api/v1/images", "", nil)
	if resp.status != http.StatusOK {
		t.Fatalf("list: %d %s", resp.status, resp.body)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(resp.body, &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("list %s: %v", resp.body, err)
	}
	checkKeys(t, "image", list.Items[0], "ref", "digest", "id", "size", "layers", "created", "status")

	// Pull streams progress, then the image.
	resp = e.postJSON(t, "/api/v1/images/pull", `{"ref":"ghcr.io/acme/tool:1"}`)
	if resp.status != http.StatusOK || resp.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("pull: %d %v %s", resp.status, resp.header, resp.body)
	}
	events := readEvents(t, resp.body)
	if diff := cmp.Diff([]string{"progress", "progress", "progress", "image"}, eventNames(events)); diff != "" {
		t.Fatalf("pull events (-want +got):\n%s", diff)
	}
	checkKeys(t, "resolve progress", []byte(events[0].data), "phase", "item")
	checkKeys(t, "download progress", []byte(events[1].data), "phase", "item", "current", "total")
	var img api.Image
	if err := json.Unmarshal([]byte(events[3].data), &img); err != nil || img.Ref != "ghcr.io/acme/tool:1" {
		t.Errorf("image event %s: %v", events[3].data, err)
	}

	// Failures after the stream started end it with an error event.
	resp = e.postJSON(t, "/api/v1/images/pull", `{"ref":"missing:1"}`)
	events = readEvents(t, resp.body)
	if len(events) != 1 || events[0].name != "error" {
		t.Fatalf("failed pull events %+v", events)
	}
	checkErrorBody(t, []byte(events[0].data), api.CodeImageNotFound)

	// Build.
	events = readEvents(t, e.postJSON(t, "/api/v1/images/build", `{"ref":"agent2env/python"}`).body)
	if len(events) != 2 || events[0].name != "progress" || events[1].name != "image" {
		t.Errorf("build events %+v", events)
	}
	events = readEvents(t, e.postJSON(t, "/api/v1/images/build", `{"ref":"nonesuch"}`).body)
	if len(events) != 1 || events[0].name != "error" {
		t.Fatalf("failed build events %+v", events)
	}
	checkErrorBody(t, []byte(events[0].data), api.CodeImageNotFound)

	// Import takes the archive as the raw body.
	resp = e.do(t, http.MethodPost, "/api/v1/images/import", "application/x-tar", strings.NewReader("archive\nfoo:1 bar:2\n"))
	events = readEvents(t, resp.body)
	if len(events) != 2 || events[0].name != "image" || events[1].name != "image" {
		t.Errorf("import events %+v", events)
	}
	events = readEvents(t, e.do(t, http.MethodPost, "/api/v1/images/import", "application/octet-stream", strings.NewReader("not a tarball")).body)
	if len(events) != 1 || events[0].name != "error" {
		t.Fatalf("failed import events %+v", events)
	}
	checkErrorBody(t, []byte(events[0].data), api.CodeInvalidRequest)
	// The archives were spooled where the image store clears what a crash
	// leaves, and are gone.
	for _, p := range e.imgs.imported {
		if filepath.Dir(p) != e.imgs.spool {
			t.Errorf("archive spooled to %s, not the image store's %s", p, e.imgs.spool)
		}
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("spooled archive %s left behind: %v", p, err)
		}
	}
	if len(e.imgs.imported) != 2 {
		t.Errorf("imported %v, want two archives", e.imgs.imported)
	}

	// Remove, refs with slashes included.
	for _, ref := range []string{"alpine", "ghcr.io/acme/tool:1"} {
		resp = e.do(t, http.MethodDelete, "/api/v1/images/"+ref, "", nil)
		if resp.status != http.StatusNoContent || len(resp.body) != 0 {
			t.Errorf("remove %s: %d %q", ref, resp.status, resp.body)
		}
		checkError(t, e.do(t, http.MethodDelete, "/api/v1/images/"+ref, "", nil), http.StatusNotFound, api.CodeImageNotFound)
	}
	resp = e.do(t, http.MethodGet, "/api/v1/images", "", nil)
	if err := json.Unmarshal(resp.body, &list); err != nil || len(list.Items) != 3 {
		t.Errorf("list after changes: %s", resp.body)
	}
}

// TestImageFollowAndStates checks the image list's images in flight and
// failed, and GET /images/follow, which streams an operation in flight as
// a pull does.
func TestImageFollowAndStates(t *testing.T) {
	e := newEnv(t, envOptions{})
	started := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e.imgs.ops = []image.Operation{
		{Ref: "agent2env/code-interpreter:latest", Build: true, Started: started,
			Progress: image.Progress{Phase: image.PhaseUnpack, Item: "sha256:l", Current: 5, Total: 10}},
		{Ref: "ghcr.io/acme/gone:1", Started: started, Ended: started.Add(time.Second), Err: errors.New("pull image: no such host")},
	}
	resp := e.do(t, http.MethodGet, "/api/v1/images", "", nil)
	var list api.List[api.Image]
	if err := json.Unmarshal(resp.body, &list); err != nil {
		t.Fatalf("list %s: %v", resp.body, err)
	}
	want := []api.Image{
		{Ref: "agent2env/code-interpreter:latest", Status: api.ImageBuilding, Started: &started,
			Progress: &api.ImageProgress{Phase: "unpack", Item: "sha256:l", Current: 5, Total: 10}},
		{Ref: "alpine", Digest: "sha256:d-alpine", ID: "sha256:i-alpine", Size: 42, Created: imageCreated, Status: api.ImageReady},
		{Ref: "ghcr.io/acme/gone:1", Status: api.ImageFailed, Started: &started, Error: "pull image: no such host"},
	}
	if diff := cmp.Diff(want, list.Items); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}

	tests := []struct {
		name   string
		query  string
		events []string
		code   string // of the error event
	}{
		{name: "in flight", query: "?ref=agent2env/building", events: []string{"progress", "progress", "progress", "image"}},
		{name: "stored", query: "?ref=alpine", events: []string{"progress", "image"}},
		{name: "neither", query: "?ref=nonesuch", events: []string{"error"}, code: api.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.do(t, http.MethodGet, "/api/v1/images/follow"+tt.query, "", nil)
			if resp.status != http.StatusOK || resp.header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("follow: %d %v %s", resp.status, resp.header, resp.body)
			}
			events := readEvents(t, resp.body)
			if diff := cmp.Diff(tt.events, eventNames(events)); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			if tt.code != "" {
				checkErrorBody(t, []byte(events[0].data), tt.code)
			}
		})
	}
	checkError(t, e.do(t, http.MethodGet, "/api/v1/images/follow", "", nil), http.StatusBadRequest, api.CodeInvalidRequest)
	checkError(t, e.do(t, http.MethodGet, "/api/v1/images/follow?ref=Not%20A%20Ref", "", nil), http.StatusBadRequest, api.CodeInvalidRequest)
}

// eventNames returns the names of events, in order.
func eventNames(events []sseEvent) []string {
	var names []string
	for _, ev := range events {
		names = append(names, ev.name)
	}
	return names
}

func TestImageBadInput(t *testing.T) {
	e := newEnv(t, envOptions{})
	tests := []struct {
		name  string
		ctype string
		body  string
		code  string
	}{
		{name: "malformed", ctype: "application/json", body: `{"ref":`},
		{name: "wrong type", ctype: "application/json", body: `{"ref":1}`},
		{name: "empty ref", ctype: "application/json", body: `{"ref":""}`},
		{name: "no ref", ctype: "application/json", body: `{}`},
		{name: "not a reference", ctype: "application/json", body: `{"ref":"Not A Ref"}`},
		{name: "empty body", ctype: "application/json"},
		{name: "trailing data", ctype: "application/json", body: `{"ref":"alpine"}]`},
		{name: "wrong content type", ctype: "text/plain", body: `{"ref":"alpine"}`, code: api.CodeUnsupportedMediaType},
		{name: "too large", ctype: "application/json", body: `{"ref":"` + strings.Repeat("a", maxJSONBody) + `"}`, code: api.CodeTooLarge},
	}
	for _, route := range []string{"pull", "build"} {
		for _, tt := range tests {
			t.Run(route+" "+tt.name, func(t *testing.T) {
				var body io.Reader
				if tt.body != "" {
					body = strings.NewReader(tt.body)
				}
				status, code := http.StatusBadRequest, api.CodeInvalidRequest
				switch tt.code {
				case api.CodeTooLarge:
					status, code = http.StatusRequestEntityTooLarge, tt.code
				case api.CodeUnsupportedMediaType:
					status, code = http.StatusUnsupportedMediaType, tt.code
				}
				checkError(t, e.do(t, http.MethodPost, "/api/v1/images/"+route, tt.ctype, body), status, code)
			})
		}
	}
}
