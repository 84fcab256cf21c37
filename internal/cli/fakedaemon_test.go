package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// fakeDaemon is an in-process stand-in for "agent2env serve" that speaks
// the REST API over httptest, keeping sandboxes, their files and images
// in memory. Sandboxes of image "ready" run at once; others are pending
// until the first GET, after which they run, or fail if their image is
// "broken"; those of image "stuck" stay pending. Exec understands a few commands: echo ARGS, bytes (the first
// 100 bytes of binaryOutput to stdout, the rest to stderr), fail CODE,
// timeout, and sleep (until the client goes).
type fakeDaemon struct {
	token string // required bearer token, if not empty

	recorder
	nextID    int
	sandboxes map[string]*api.Sandbox
	files     map[string]fakeFile // by "id:path"
	images    []api.Image
	creates   []api.CreateSandboxRequest
	execs     []api.ExecRequest
	imports   [][]byte
	// built are the "building…" images whose build a follow has seen to
	// the end: their sandboxes stay pending until then.
	built map[string]bool
}

type fakeFile struct {
	data []byte
	mode string
	// cut makes a download of the file end early: its length is announced
	// but only data is sent, as when a connection breaks.
	cut bool
}

// binaryOutput is command output that is not UTF-8: every byte value,
// then invalid sequences (a lone continuation byte, a cut character, an
// overlong NUL, a surrogate).
var binaryOutput = func() string {
	b := make([]byte, 0, 300)
	for i := range 256 {
		b = append(b, byte(i))
	}
	return string(b) + "\x80 \xe2\x82 \xc0\x80 \xed\xa0\x80 \xe2\x82\xac"
}()

// newFakeDaemon starts a fake daemon and points AGENT2ENV_URL at it.
func newFakeDaemon(t *testing.T) *fakeDaemon {
	d := &fakeDaemon{sandboxes: map[string]*api.Sandbox{}, files: map[string]fakeFile{}, built: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sandboxes", d.create)
	mux.HandleFunc("GET /api/v1/sandboxes", d.list)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}", d.get)
	mux.HandleFunc("DELETE /api/v1/sandboxes/{id}", d.remove)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/exec/stream", d.exec)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/files", d.upload)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/files", d.download)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/files/stat", d.statFile)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}/logs", d.logs)
	mux.HandleFunc("GET /api/v1/images", d.listImages)
	mux.HandleFunc("POST /api/v1/images/pull", d.pull)
	mux.HandleFunc("POST /api/v1/images/build", d.pull)
	mux.HandleFunc("POST /api/v1/images/import", d.importTar)
	mux.HandleFunc("GET /api/v1/images/follow", d.followImage)
	mux.HandleFunc("DELETE /api/v1/images/{ref...}", d.removeImage)
	// What login asks to check the token.
	mux.HandleFunc("GET /api/v1/templates", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.TemplateList{Items: []api.Template{}, Page: 1, PageSize: 1})
	})
	d.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		token := d.token
		d.mu.Unlock()
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			fail(w, http.StatusUnauthorized, api.CodeUnauthorized, "missing or wrong token")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	return d
}

// recorder is the part the fake daemons share: it serves one as the
// daemon at AGENT2ENV_URL and records the requests it gets, as "METHOD
// PATH?QUERY BODY". A fake keeps its own state under mu as well.
type recorder struct {
	mu       sync.Mutex
	requests []string
}

// serve serves h as the daemon at AGENT2ENV_URL until the test ends,
// recording each request.
func (rec *recorder) serve(t *testing.T, h http.Handler) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		line := r.Method + " " + r.URL.Path
		if r.URL.RawQuery != "" {
			line += "?" + r.URL.RawQuery
		}
		if len(b) > 0 {
			line += " " + string(b)
		}
		rec.mu.Lock()
		rec.requests = append(rec.requests, line)
		rec.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv(client.EnvURL, srv.URL)
	t.Setenv(client.EnvToken, "")
}

// checkUsageError runs args, a command line the CLI refuses, and checks
// that it exits 2 with want and the usage on stderr, and that no request
// reached the daemon rec serves.
func checkUsageError(t *testing.T, rec *recorder, args []string, want string) {
	t.Helper()
	code, stdout, stderr := run(t, args...)
	if code != 2 || stdout != "" || !strings.Contains(stderr, want) || !strings.Contains(stderr, "usage: agent2env") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 2, usage and %q", code, stdout, stderr, want)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.requests) != 0 {
		t.Errorf("requests reached the daemon: %q", rec.requests)
	}
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	reply(w, status, api.Error{Message: msg, Code: code})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// addSandbox stores a sandbox as if it had been created.
func (d *fakeDaemon) addSandbox(sb api.Sandbox) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sandboxes[sb.ID] = &sb
}

// sandbox returns the sandbox of the request's id, or answers 404.
func (d *fakeDaemon) sandbox(w http.ResponseWriter, r *http.Request) *api.Sandbox {
	sb := d.sandboxes[r.PathValue("id")]
	if sb == nil {
		fail(w, http.StatusNotFound, api.CodeSandboxNotFound, fmt.Sprintf("sandbox %s not found", r.PathValue("id")))
	}
	return sb
}

func (d *fakeDaemon) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.creates = append(d.creates, req)
	if req.Image == "" {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, "image is required")
		return
	}
	d.nextID++
	sb := &api.Sandbox{ID: fmt.Sprintf("sb%d", d.nextID), Image: req.Image, CPU: req.CPU, Memory: req.Memory,
		Env: req.Env, Status: api.StatusPending, CreatedAt: time.Now().UTC()}
	if req.TTL != nil {
		sb.TTL = *req.TTL
	}
	if req.Image == "ready" {
		sb.Status = api.StatusRunning
	}
	d.sandboxes[sb.ID] = sb
	reply(w, http.StatusCreated, sb)
}

func (d *fakeDaemon) list(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := api.List[api.Sandbox]{Items: []api.Sandbox{}}
	for _, sb := range d.sandboxes {
		out.Items = append(out.Items, *sb)
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].ID < out.Items[j].ID })
	reply(w, http.StatusOK, out)
}

func (d *fakeDaemon) get(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sb := d.sandbox(w, r)
	if sb == nil {
		return
	}
	if sb.Status == api.StatusPending && sb.Image != "stuck" && (!strings.HasPrefix(sb.Image, "building") || d.built[sb.Image]) {
		if sb.Image == "broken" {
			sb.Status, sb.Reason = api.StatusFailed, "prepare image broken: manifest unknown"
		} else {
			sb.Status = api.StatusRunning
		}
	}
	reply(w, http.StatusOK, sb)
}

func (d *fakeDaemon) remove(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sandbox(w, r) == nil {
		return
	}
	delete(d.sandboxes, r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}

func (d *fakeDaemon) exec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Command) == 0 {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, "bad exec request")
		return
	}
	d.mu.Lock()
	sb := d.sandbox(w, r)
	d.execs = append(d.execs, req)
	d.mu.Unlock()
	if sb == nil {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(name string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		http.NewResponseController(w).Flush()
	}
	output := func(name, data string) {
		ev := api.ExecEvent{Type: name}
		ev.Data, ev.Encoding = api.EncodeOutput(data, req.OutputEncoding)
		send(name, ev)
	}
	exit := api.ExecEvent{Type: "exit", Duration: 1}
	switch req.Command[0] {
	case "echo":
		output("stdout", strings.Join(req.Command[1:], " "))
		output("stdout", "\n")
	case "bytes":
		output("stdout", binaryOutput[:100])
		output("stderr", binaryOutput[100:])
	case "fail":
		output("stderr", "failing\n")
		exit.ExitCode, _ = strconv.Atoi(req.Command[1])
	case "timeout":
		exit.ExitCode, exit.TimedOut = -1, true
	case "sleep":
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		return
	}
	send("exit", exit)
}

func (d *fakeDaemon) upload(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
		return
	}
	var path string
	f := fakeFile{mode: "0644"}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
			return
		}
		b, err := io.ReadAll(part)
		if err != nil {
			fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
			return
		}
		switch part.FormName() {
		case "path":
			path = string(b)
		case "mode":
			f.mode = string(b)
		case "file":
			f.data = b
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sandbox(w, r) == nil {
		return
	}
	if d.isDir(r.PathValue("id"), path) {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, path+" is a directory")
		return
	}
	d.files[r.PathValue("id")+":"+path] = f
	reply(w, http.StatusOK, api.FileInfo{Name: path[strings.LastIndex(path, "/")+1:], Path: path, Size: int64(len(f.data)), Mode: f.mode})
}

func (d *fakeDaemon) download(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sandbox(w, r) == nil {
		return
	}
	f, ok := d.files[r.PathValue("id")+":"+r.URL.Query().Get("path")]
	if !ok {
		fail(w, http.StatusNotFound, api.CodeFileNotFound, "no such file "+r.URL.Query().Get("path"))
		return
	}
	if f.cut {
		w.Header().Set("Content-Length", strconv.Itoa(len(f.data)+100))
	}
	w.Write(f.data)
}

// isDir says whether p is a directory of sandbox id: one that holds a
// file. The caller holds d.mu.
func (d *fakeDaemon) isDir(id, p string) bool {
	for k := range d.files {
		if strings.HasPrefix(k, id+":"+strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

func (d *fakeDaemon) statFile(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sandbox(w, r) == nil {
		return
	}
	id, p := r.PathValue("id"), r.URL.Query().Get("path")
	if data, ok := d.files[id+":"+p]; ok {
		reply(w, http.StatusOK, api.FileInfo{Name: path.Base(p), Path: p, Size: int64(len(data.data)), Mode: data.mode})
		return
	}
	if !d.isDir(id, p) {
		fail(w, http.StatusNotFound, api.CodeFileNotFound, "no such file "+p)
		return
	}
	reply(w, http.StatusOK, api.FileInfo{Name: path.Base(p), Path: p, IsDir: true})
}

func (d *fakeDaemon) logs(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sb := d.sandbox(w, r)
	if sb == nil {
		return
	}
	resp := api.LogsResponse{
		Logs:   "agent listening",
		Events: []string{"2025-01-02T03:04:05.000Z pending: created from image alpine", "2025-01-02T03:04:06.000Z running: agent ready"},
	}
	if sb.ID == "sb8" { // the one with a long history
		resp.EventsDropped = 998
	}
	reply(w, http.StatusOK, resp)
}

func (d *fakeDaemon) listImages(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	reply(w, http.StatusOK, api.List[api.Image]{Items: append([]api.Image{}, d.images...)})
}

// sse writes one Server-Sent Event.
func sse(w http.ResponseWriter, name string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
}

// pull serves pull and build: ref "missing" fails, others succeed.
func (d *fakeDaemon) pull(w http.ResponseWriter, r *http.Request) {
	var req api.ImageRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "progress", api.ImageProgress{Phase: "resolve", Item: req.Ref})
	if req.Ref == "missing" {
		sse(w, "error", api.Error{Message: "image missing not found", Code: api.CodeImageNotFound})
		return
	}
	sse(w, "progress", api.ImageProgress{Phase: "download", Item: "sha256:layer", Current: 1 << 20, Total: 2 << 20})
	sse(w, "progress", api.ImageProgress{Phase: "download", Item: "sha256:layer", Current: 2 << 20, Total: 2 << 20})
	img := api.Image{Ref: "docker.io/library/" + req.Ref, ID: "sha256:0123456789abcdef", Size: 2 << 20, Layers: 1, Created: time.Now()}
	d.mu.Lock()
	d.images = append(d.images, img)
	d.mu.Unlock()
	sse(w, "image", img)
}

// followImage follows the build of an image named "building…": progress
// of the build and its layer's unpack, then the image. A stored image
// answers at once; any other is neither stored nor in flight.
func (d *fakeDaemon) followImage(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("ref")
	w.Header().Set("Content-Type", "text/event-stream")
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, img := range d.images {
		if img.Ref == ref && img.Status != api.ImageBuilding {
			sse(w, "progress", api.ImageProgress{Phase: "done", Item: ref})
			sse(w, "image", img)
			return
		}
	}
	if !strings.HasPrefix(ref, "building") {
		sse(w, "error", api.Error{Message: "image " + ref + " is not stored, and is not being pulled or built", Code: api.CodeNotFound})
		return
	}
	for _, ev := range []api.ImageProgress{
		{Phase: "build", Item: "I: running apt-get update..."},
		{Phase: "build", Item: "Setting up python3 (3.11.2-1+b1)"},
		{Phase: "unpack", Item: "sha256:layer", Total: 2 << 20},
		{Phase: "unpack", Item: "sha256:layer", Current: 2 << 20, Total: 2 << 20},
		{Phase: "done", Item: ref},
	} {
		sse(w, "progress", ev)
	}
	img := api.Image{Ref: ref, ID: "sha256:0123456789abcdef", Size: 2 << 20, Layers: 1, Created: time.Now(), Status: api.ImageReady}
	d.images = append(d.images, img)
	d.built[ref] = true
	sse(w, "image", img)
}

func (d *fakeDaemon) importTar(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil || len(b) == 0 {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, "empty archive")
		return
	}
	d.mu.Lock()
	d.imports = append(d.imports, b)
	d.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "progress", api.ImageProgress{Phase: "unpack", Item: "sha256:layer"})
	sse(w, "image", api.Image{Ref: "imported/one:latest", Size: int64(len(b))})
	sse(w, "image", api.Image{Ref: "imported/two:latest", Size: int64(len(b))})
}

func (d *fakeDaemon) removeImage(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, img := range d.images {
		if img.Ref == r.PathValue("ref") {
			d.images = append(d.images[:i], d.images[i+1:]...)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	fail(w, http.StatusNotFound, api.CodeImageNotFound, "image "+r.PathValue("ref")+" not found")
}
