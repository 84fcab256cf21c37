package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// fakeExecd is the execd part of the sandbox service in memory: sandbox
// "a" runs (token "tok-a"), "p" is pending until its third check; a
// command's output and exit are scripted by its last argument.
type fakeExecd struct {
	mu     sync.Mutex
	sbs    *fakeSandboxes
	checks map[string]int
	execs  []api.ExecRequest
	files  map[string][]byte
	modes  map[string]fs.FileMode
}

func (f *fakeExecd) Authorize(ctx context.Context, id, token string) error {
	sb, err := f.sbs.Get(ctx, id)
	if err != nil {
		return err
	}
	if token != sb.AccessToken {
		return fmt.Errorf("invalid access token: %w", errdefs.ErrUnauthenticated)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks[id]++
	if sb.Status == api.StatusPending {
		if f.checks[id] < 3 {
			return errdefs.WithCode(errdefs.Precondition("sandbox %s is not running", id), api.CodeSandboxNotReady)
		}
		f.sbs.mu.Lock()
		f.sbs.byID[id].Status = api.StatusRunning
		f.sbs.mu.Unlock()
	}
	if sb.Status == api.StatusFailed {
		return errdefs.WithCode(errdefs.Precondition("sandbox %s is not running", id), api.CodeSandboxNotReady)
	}
	return nil
}

func (f *fakeExecd) ExecStream(ctx context.Context, id string, req api.ExecRequest, start func(), emit func(api.ExecEvent) error) (api.ExecEvent, error) {
	if req.Timeout > int(service.MaxExecTimeout/time.Second) {
		return api.ExecEvent{}, errdefs.Invalid("timeout %d is above the maximum", req.Timeout)
	}
	if req.Cwd == "/missing" {
		return api.ExecEvent{}, errdefs.Invalid("working directory %s does not exist", req.Cwd)
	}
	f.mu.Lock()
	f.execs = append(f.execs, req)
	f.mu.Unlock()
	start()
	switch script := req.Command[len(req.Command)-1]; script {
	case "broken":
		return api.ExecEvent{}, errors.New("agent connection lost")
	case "slow":
		time.Sleep(50 * time.Millisecond)
	case "block":
		// Runs until cancelled, as the agent's exec, which then kills it.
		<-ctx.Done()
		return api.ExecEvent{}, fmt.Errorf("exec in sandbox %s: %w", id, ctx.Err())
	case "cut":
		// Output read in pieces that cut characters, as a pipe's reads do.
		for _, ev := range []api.ExecEvent{
			{Type: "stdout", Data: "h\xc3"}, {Type: "stdout", Data: "\xa9llo \xe2\x82"}, {Type: "stderr", Data: "x"},
			{Type: "stdout", Data: "\xac\n"}, {Type: "stdout", Data: "\xff"}, {Type: "stdout", Data: "\xe2"}, {Type: "stdout", Data: "\x82"},
			{Type: "stdout", Data: "end\xe2"},
		} {
			if err := emit(ev); err != nil {
				return api.ExecEvent{}, err
			}
		}
		return api.ExecEvent{Type: "exit", Duration: 1}, nil
	}
	if err := emit(api.ExecEvent{Type: "stdout", Data: "hi\n"}); err != nil {
		return api.ExecEvent{}, err
	}
	if err := emit(api.ExecEvent{Type: "stderr", Data: "line \"two\"\nthree\n"}); err != nil {
		return api.ExecEvent{}, err
	}
	switch req.Command[len(req.Command)-1] {
	case "exit 3":
		return api.ExecEvent{Type: "exit", ExitCode: 3, Duration: 12.4}, nil
	case "timeout":
		return api.ExecEvent{Type: "exit", ExitCode: 137, TimedOut: true, Signal: "SIGKILL"}, nil
	case "exit 137":
		return api.ExecEvent{Type: "exit", ExitCode: 137}, nil
	case "kill -TERM $$":
		return api.ExecEvent{Type: "exit", ExitCode: 143, Signal: "SIGTERM"}, nil
	case "oom":
		return api.ExecEvent{Type: "exit", ExitCode: 137, Signal: "SIGKILL", OOMKilled: true, Reason: api.ExecOutOfMemory}, nil
	}
	return api.ExecEvent{Type: "exit", Duration: 12.6}, nil
}

// UploadFiles keeps the files only when all of them were written, as
// the service's batch does.
func (f *fakeExecd) UploadFiles(_ context.Context, _ string, files func(put service.PutFile) error) ([]api.FileInfo, error) {
	staged := map[string][]byte{}
	modes := map[string]fs.FileMode{}
	var out []api.FileInfo
	err := files(func(path string, mode fs.FileMode, content io.Reader) error {
		if strings.Contains(path, "..") {
			return errdefs.Invalid("path %s steps out", path)
		}
		b, err := io.ReadAll(content)
		if err != nil {
			return err
		}
		staged[path], modes[path] = b, mode
		out = append(out, api.FileInfo{Path: path, Size: int64(len(b))})
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	maps.Copy(f.files, staged)
	maps.Copy(f.modes, modes)
	return out, nil
}

func (f *fakeExecd) Download(_ context.Context, _ string, path string) (io.ReadCloser, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.files[path]
	if !ok {
		return nil, 0, errdefs.WithCode(errdefs.NotFound("file %s not found", path), api.CodeFileNotFound)
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// newExecdSetup is newSetup with an execd over sandboxes a (running),
// p (pending) and f (failed).
func newExecdSetup(t *testing.T) (*setup, *fakeExecd) {
	t.Helper()
	s := newSetup(t, sandbox("a", api.StatusRunning, 0), sandbox("p", api.StatusPending, 1), sandbox("f", api.StatusFailed, 2))
	ex := &fakeExecd{sbs: s.sbs, checks: map[string]int{}, files: map[string][]byte{"/tmp/x.txt": []byte("hello")},
		modes: map[string]fs.FileMode{}}
	s.h.cfg.Execd = ex
	return s, ex
}

// execd sends a request to sandbox id's execd with its token (unless hdr
// names one) and returns the answer.
func execdDo(t *testing.T, s *setup, method, target, ctype string, body io.Reader, token string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set(HeaderAccessToken, token)
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	if rec.Code >= 300 {
		var eb map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb["code"] == "" || eb["message"] == "" || len(eb) != 2 {
			t.Errorf("%s %s: error body %q, want {code, message}", method, target, rec.Body)
		}
	}
	return rec
}

// events parses a command stream: each frame one JSON object on one line
// followed by an empty line, with an integer timestamp.
func events(t *testing.T, body string) []map[string]any {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end a frame: %q", body)
	}
	var out []map[string]any
	for _, frame := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		if strings.Contains(frame, "\n") {
			t.Fatalf("frame spans lines: %q", frame)
		}
		dec := json.NewDecoder(strings.NewReader(frame))
		dec.UseNumber()
		var ev map[string]any
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("frame %q: %v", frame, err)
		}
		if ts, ok := ev["timestamp"].(json.Number); !ok || strings.ContainsAny(ts.String(), ".eE") {
			t.Fatalf("frame %q: timestamp is not an integer", frame)
		}
		if ev["type"] != "ping" {
			out = append(out, ev)
		}
	}
	return out
}

func TestExecdCommand(t *testing.T) {
	maxSecs := int(service.MaxExecTimeout / time.Second)
	for _, tc := range []struct {
		name, body string
		wantStatus int
		wantCode   string
		wantReq    *api.ExecRequest
		wantLast   string // JSON of the last event (keys sorted), without its timestamp
	}{
		{
			// No timeout (or 0) is none, as execd's: the longest allowed.
			name: "shell text, no timeout", body: `{"command":"echo hi"}`, wantStatus: 200,
			wantReq:  &api.ExecRequest{Command: []string{"bash", "-c", "echo hi"}, Timeout: maxSecs},
			wantLast: `{"execution_time":13,"type":"execution_complete"}`,
		},
		{
			name: "timeout 0", body: `{"command":"echo hi","timeout":0}`, wantStatus: 200,
			wantReq:  &api.ExecRequest{Command: []string{"bash", "-c", "echo hi"}, Timeout: maxSecs},
			wantLast: `{"execution_time":13,"type":"execution_complete"}`,
		},
		{
			name: "argv, cwd, envs, timeout in ms rounded up", wantStatus: 200,
			body:     `{"argv":["python3","-c","ok"],"cwd":"/tmp","envs":{"A":"1"},"timeout":1500,"uid":1000,"gid":1000}`,
			wantReq:  &api.ExecRequest{Command: []string{"python3", "-c", "ok"}, Cwd: "/tmp", Env: map[string]string{"A": "1"}, Timeout: 2},
			wantLast: `{"execution_time":13,"type":"execution_complete"}`,
		},
		{
			name: "non-zero exit", body: `{"command":"exit 3"}`, wantStatus: 200,
			wantLast: `{"error":{"ename":"CommandExecError","evalue":"3","traceback":["exit status 3"]},"type":"error"}`,
		},
		{
			name: "timed out", body: `{"command":"timeout"}`, wantStatus: 200,
			wantLast: `{"error":{"ename":"CommandExecError","evalue":"-1","traceback":["command timed out"]},"type":"error"}`,
		},
		{
			name: "exit 137 of its own", body: `{"command":"exit 137"}`, wantStatus: 200,
			wantLast: `{"error":{"ename":"CommandExecError","evalue":"137","traceback":["exit status 137"]},"type":"error"}`,
		},
		{
			// Stock execd: Go's exit code of a process a signal ended.
			name: "killed by a signal", body: `{"command":"kill -TERM $$"}`, wantStatus: 200,
			wantLast: `{"error":{"ename":"CommandExecError","evalue":"-1","traceback":["signal: terminated"]},"type":"error"}`,
		},
		{
			name: "out of memory", body: `{"command":"oom"}`, wantStatus: 200,
			wantLast: `{"error":{"ename":"CommandExecError","evalue":"-1","traceback":["signal: killed"]},"type":"error"}`,
		},
		{
			name: "broken mid-stream", body: `{"command":"broken"}`, wantStatus: 200,
			wantLast: `{"error":{"ename":"CommandExecError","evalue":"agent connection lost","traceback":["agent connection lost"]},"type":"error"}`,
		},
		{name: "background", body: `{"command":"sleep 1","background":true}`, wantStatus: 501, wantCode: api.CodeNotImplemented},
		{name: "no command", body: `{}`, wantStatus: 400},
		{name: "both forms", body: `{"command":"a","argv":["b"]}`, wantStatus: 400},
		{name: "another uid", body: `{"command":"id","uid":0}`, wantStatus: 400},
		{name: "gid without uid", body: `{"command":"id","gid":1000}`, wantStatus: 400},
		{name: "negative timeout", body: `{"command":"id","timeout":-1}`, wantStatus: 400},
		{name: "huge timeout", body: `{"command":"id","timeout":9000000000000}`, wantStatus: 400},
		{name: "not json", body: `{"command":`, wantStatus: 400},
		{name: "two values", body: `{"command":"id"} {}`, wantStatus: 400},
		{name: "a stray bracket after the value", body: `{"command":"id"}]`, wantStatus: 400},
		{name: "a stray brace after the value", body: `{"command":"id"}}`, wantStatus: 400},
		{name: "space after the value", body: "{\"command\":\"id\"}\n \t", wantStatus: 200, wantLast: `{"execution_time":13,"type":"execution_complete"}`},
		// Refused by the sandbox before it ran: an answer, not a stream.
		{name: "missing cwd", body: `{"command":"id","cwd":"/missing"}`, wantStatus: 400, wantCode: api.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ex := newExecdSetup(t)
			rec := execdDo(t, s, "POST", "/opensandbox/a/execd/command", "application/json", strings.NewReader(tc.body), "tok-a")
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantCode != "" {
				var eb errorBody
				_ = json.Unmarshal(rec.Body.Bytes(), &eb)
				if eb.Code != tc.wantCode {
					t.Errorf("code %q, want %q", eb.Code, tc.wantCode)
				}
			}
			if tc.wantReq != nil && (len(ex.execs) != 1 || fmt.Sprint(ex.execs[0]) != fmt.Sprint(*tc.wantReq)) {
				t.Errorf("exec requests %+v, want %+v", ex.execs, *tc.wantReq)
			}
			if rec.Code != http.StatusOK {
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			evs := events(t, rec.Body.String())
			if evs[0]["type"] != "init" || evs[0]["text"] == "" {
				t.Errorf("first event %v, want init with an id", evs[0])
			}
			if tc.name != "broken mid-stream" {
				if len(evs) != 4 || evs[1]["type"] != "stdout" || evs[1]["text"] != "hi\n" ||
					evs[2]["type"] != "stderr" || evs[2]["text"] != "line \"two\"\nthree\n" {
					t.Errorf("events %v", evs)
				}
			}
			last := evs[len(evs)-1]
			delete(last, "timestamp")
			if got, _ := json.Marshal(last); string(got) != tc.wantLast {
				t.Errorf("last event %s, want %s", got, tc.wantLast)
			}
		})
	}
}

// Output events carry whole characters: a character a piece of output
// cut goes with the next piece of its stream, and what is left of one at
// the end is sent as it is (as invalid UTF-8 is: U+FFFD).
func TestExecdCommandCutCharacters(t *testing.T) {
	s, _ := newExecdSetup(t)
	rec := execdDo(t, s, "POST", "/opensandbox/a/execd/command", "application/json", strings.NewReader(`{"command":"cut"}`), "tok-a")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d %s", rec.Code, rec.Body)
	}
	var got []string
	for _, ev := range events(t, rec.Body.String())[1:] {
		text, _ := ev["text"].(string)
		got = append(got, fmt.Sprint(ev["type"], " ", text))
	}
	want := []string{"stdout h", "stdout éllo ", "stderr x", "stdout €\n", "stdout \ufffd",
		"stdout \ufffd\ufffdend", "stdout \ufffd", "execution_complete "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
}

// A silent command's stream carries pings, which keep clients' read
// timeouts from firing.
func TestExecdKeepAlive(t *testing.T) {
	old := keepAlive
	keepAlive = 10 * time.Millisecond
	defer func() { keepAlive = old }()
	s, _ := newExecdSetup(t)
	rec := execdDo(t, s, "POST", "/opensandbox/a/execd/command", "application/json", strings.NewReader(`{"command":"slow"}`), "tok-a")
	if !strings.Contains(rec.Body.String(), `{"type":"ping","text":"pong","timestamp":`) {
		t.Errorf("no ping in %q", rec.Body)
	}
	if evs := events(t, rec.Body.String()); evs[len(evs)-1]["type"] != "execution_complete" {
		t.Errorf("events %v", evs)
	}
}

// upload returns a multipart body of metadata and file parts as the SDK
// sends them; a nil metadata leaves that part out.
func uploadBody(parts ...string) (string, io.Reader) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(parts); i += 2 {
		if parts[i] != "" {
			w, _ := mw.CreateFormFile("metadata", "metadata")
			io.WriteString(w, parts[i])
		}
		if parts[i+1] != "\x00" {
			w, _ := mw.CreateFormFile("file", "x")
			io.WriteString(w, parts[i+1])
		}
	}
	mw.Close()
	return mw.FormDataContentType(), &b
}

func TestExecdFiles(t *testing.T) {
	for _, tc := range []struct {
		name       string
		parts      []string
		wantStatus int
		wantFiles  map[string]string
		wantModes  map[string]fs.FileMode
		wantInMsg  string
	}{
		{
			name: "two files", wantStatus: 200,
			parts:     []string{`{"path":"/tmp/a","owner":null,"group":null,"mode":755}`, "A", `{"path":"/tmp/b"}`, "BB"},
			wantFiles: map[string]string{"/tmp/a": "A", "/tmp/b": "BB"}, wantModes: map[string]fs.FileMode{"/tmp/a": 0o755, "/tmp/b": 0o644},
		},
		{name: "mode 644", wantStatus: 200, parts: []string{`{"path":"/tmp/c","mode":644}`, ""},
			wantFiles: map[string]string{"/tmp/c": ""}, wantModes: map[string]fs.FileMode{"/tmp/c": 0o644}},
		{name: "mode not octal", wantStatus: 400, parts: []string{`{"path":"/tmp/c","mode":789}`, "x"}},
		{name: "mode setuid", wantStatus: 400, parts: []string{`{"path":"/tmp/c","mode":4755}`, "x"}},
		// A metadata part is checked whole as it arrives, before
		// anything else is read or written.
		{name: "mode not octal, refused with its metadata", wantStatus: 400, wantInMsg: "metadata for /tmp/c: mode 789",
			parts: []string{`{"path":"/tmp/c","mode":789}`, "\x00", `{"path":"/tmp/d"}`, "x"}},
		{name: "owner", wantStatus: 400, parts: []string{`{"path":"/tmp/c","owner":"root"}`, "x"}},
		{name: "no path", wantStatus: 400, parts: []string{`{"mode":644}`, "x"}},
		{name: "metadata not JSON", wantStatus: 400, wantInMsg: "metadata part: line 1, column 9: unexpected",
			parts: []string{`{"path":}`, "x"}},
		{name: "metadata path not a string", wantStatus: 400, wantInMsg: "metadata part: path must be a string (got number)",
			parts: []string{`{"path":1}`, "x"}},
		{name: "file before metadata", wantStatus: 400, parts: []string{"", "x"}},
		{name: "metadata without file", wantStatus: 400, parts: []string{`{"path":"/tmp/c"}`, "\x00"}},
		{name: "two metadata", wantStatus: 400, parts: []string{`{"path":"/tmp/c"}`, "\x00", `{"path":"/tmp/d"}`, "x"}},
		{name: "empty", wantStatus: 400, parts: nil},
		{name: "service refusal", wantStatus: 400, parts: []string{`{"path":"../x"}`, "x"}},
		// A body refused at any part writes none of its files.
		{name: "a later file refused", wantStatus: 400, parts: []string{`{"path":"/tmp/a"}`, "A", `{"path":"../x"}`, "x"}},
		{name: "a later metadata refused", wantStatus: 400, parts: []string{`{"path":"/tmp/a"}`, "A", `{"path":"/tmp/b","mode":9}`, "x"}},
		{name: "the last metadata without its file", wantStatus: 400, parts: []string{`{"path":"/tmp/a"}`, "A", `{"path":"/tmp/b"}`, "\x00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ex := newExecdSetup(t)
			before := len(ex.files)
			defer func() {
				if tc.wantStatus != http.StatusOK && len(ex.files) != before {
					t.Errorf("a refused upload wrote %d files", len(ex.files)-before)
				}
			}()
			ctype, body := uploadBody(tc.parts...)
			rec := execdDo(t, s, "POST", "/opensandbox/a/execd/files/upload", ctype, body, "tok-a")
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if !strings.Contains(rec.Body.String(), tc.wantInMsg) {
				t.Errorf("body %s does not say %q", rec.Body, tc.wantInMsg)
			}
			for p, want := range tc.wantFiles {
				if got := string(ex.files[p]); got != want || ex.modes[p] != tc.wantModes[p] {
					t.Errorf("%s: %q mode %o, want %q mode %o", p, got, ex.modes[p], want, tc.wantModes[p])
				}
			}
		})
	}
	s, _ := newExecdSetup(t)
	rec := execdDo(t, s, "POST", "/opensandbox/a/execd/files/upload", "application/json", strings.NewReader("{}"), "tok-a")
	if rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("upload of JSON: %d, want 415", rec.Code)
	}
}

func TestExecdDownload(t *testing.T) {
	for _, tc := range []struct {
		target     string
		hdr        string
		wantStatus int
		wantBody   string
	}{
		{"/opensandbox/a/execd/files/download?path=/tmp/x.txt", "", 200, "hello"},
		{"/opensandbox/a/execd/files/download?path=/tmp/none", "", 404, ""},
		{"/opensandbox/a/execd/files/download", "", 400, ""},
		{"/opensandbox/a/execd/files/download?path=/tmp/x.txt", "bytes=0-1", 501, ""},
		{"/opensandbox/a/execd/files/download?path=/tmp/x.txt&offset=1&limit=2", "", 501, ""},
	} {
		t.Run(tc.target+" "+tc.hdr, func(t *testing.T) {
			s, _ := newExecdSetup(t)
			req := httptest.NewRequest("GET", tc.target, nil)
			req.Header.Set(HeaderAccessToken, "tok-a")
			if tc.hdr != "" {
				req.Header.Set("Range", tc.hdr)
			}
			rec := httptest.NewRecorder()
			s.h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus == 200 {
				if rec.Body.String() != tc.wantBody || rec.Header().Get("Content-Length") != "5" ||
					rec.Header().Get("Content-Disposition") != "attachment; filename=x.txt" {
					t.Errorf("body %q, headers %v", rec.Body, rec.Header())
				}
			}
		})
	}
}

// Every execd route checks the sandbox's token first; a ping waits for a
// pending sandbox; routes not offered are 501, unknown ones 404.
func TestExecdRoutes(t *testing.T) {
	for _, tc := range []struct {
		method, target, token string
		wantStatus            int
	}{
		{"GET", "/opensandbox/a/execd/ping", "tok-a", 200},
		{"GET", "/opensandbox/p/execd/ping", "tok-p", 200}, // pending, then running
		{"GET", "/opensandbox/f/execd/ping", "tok-f", 409}, // failed: no wait
		{"GET", "/opensandbox/a/execd/ping", "", 401},
		{"GET", "/opensandbox/a/execd/ping", "tok-p", 401},
		{"POST", "/opensandbox/a/execd/command", "wrong", 401},
		{"GET", "/opensandbox/none/execd/ping", "tok-a", 404},
		{"POST", "/opensandbox/a/execd/ping", "tok-a", 405},
		{"GET", "/opensandbox/a/execd/command", "tok-a", 405},
		{"DELETE", "/opensandbox/a/execd/command?id=x", "tok-a", 501},
		{"GET", "/opensandbox/a/execd/command/status/x", "tok-a", 501},
		{"POST", "/opensandbox/a/execd/session", "tok-a", 501},
		{"POST", "/opensandbox/a/execd/code/context", "tok-a", 501},
		{"GET", "/opensandbox/a/execd/files/info?path=/", "tok-a", 501},
		{"POST", "/opensandbox/a/execd/files/replace", "tok-a", 501},
		{"GET", "/opensandbox/a/execd/directories/list", "tok-a", 501},
		{"GET", "/opensandbox/a/execd/metrics", "tok-a", 501},
		{"GET", "/opensandbox/a/egress/policy", "wrong", 401},
		{"GET", "/opensandbox/a/execd/nothing", "tok-a", 404},
		{"GET", "/opensandbox/a/other/ping", "tok-a", 404},
		{"GET", "/opensandbox/a", "tok-a", 404},
		{"GET", "/opensandbox/", "tok-a", 404},
	} {
		t.Run(tc.method+" "+tc.target+" "+tc.token, func(t *testing.T) {
			s, _ := newExecdSetup(t)
			rec := execdDo(t, s, tc.method, tc.target, "", nil, tc.token)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
		})
	}
	// Without an execd the routes are 501.
	s := newSetup(t, sandbox("a", api.StatusRunning, 0))
	if rec := execdDo(t, s, "GET", "/opensandbox/a/execd/ping", "", nil, "tok-a"); rec.Code != http.StatusNotImplemented {
		t.Errorf("ping without an execd: %d, want 501", rec.Code)
	}
}

// openStream posts body to target of srv with sandbox a's token and
// returns the event stream it answers, read past its init event, and that
// event's id.
func openStream(t *testing.T, srv *httptest.Server, target, body string) (*json.Decoder, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderAccessToken, "tok-a")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	var init struct{ Type, Text string }
	dec := json.NewDecoder(resp.Body)
	if err := dec.Decode(&init); err != nil || init.Type != "init" {
		t.Fatalf("init %+v: %v", init, err)
	}
	return dec, init.Text
}

// lastEvent reads the stream of dec to its end and returns its last
// event other than a ping.
func lastEvent(dec *json.Decoder) map[string]any {
	var last map[string]any
	for {
		var ev map[string]any
		if err := dec.Decode(&ev); err != nil {
			return last
		}
		if ev["type"] != "ping" {
			last = ev
		}
	}
}

// DELETE /command?id= interrupts a foreground command of the same sandbox,
// by the id of its init event, as stock execd's: its stream ends with the
// error of a command SIGKILL ended (exit code -1), and the interrupt
// answers once it has.
func TestExecdInterruptForeground(t *testing.T) {
	s, _ := newExecdSetup(t)
	srv := httptest.NewServer(s.h)
	t.Cleanup(srv.Close)
	dec, execID := openStream(t, srv, "/opensandbox/a/execd/command", `{"command":"block"}`)
	for _, tc := range []struct {
		target string
		want   int
	}{
		{"/opensandbox/a/execd/command", 400},              // no id
		{"/opensandbox/a/execd/command?id=nope", 501},      // unknown, and no background commands here
		{"/opensandbox/a/execd/command?id=" + execID, 200}, // this one
	} {
		rec := execdDo(t, s, "DELETE", tc.target, "", nil, "tok-a")
		if rec.Code != tc.want {
			t.Errorf("DELETE %s: %d %s, want %d", tc.target, rec.Code, rec.Body, tc.want)
		}
	}
	if last := lastEvent(dec); fmt.Sprint(last["error"]) != "map[ename:CommandExecError evalue:-1 traceback:[signal: killed]]" {
		t.Errorf("last event %v", last)
	}
}
