package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/session"
)

// The fuzz targets set up their sandboxes lazily, inside the fuzz function:
// under -fuzz the coordinating process calls the target but never the
// function, and it must not start an agent, whose reaper would collect the
// exit status of the fuzz workers it runs with os/exec. Run them with
// -run=^$ so that no other test starts one there either:
//
//	go test -run='^$' -fuzz=FuzzCreateSandbox -fuzztime=20s ./internal/httpapi/

// lazyEnv is an env built on first use, by the fuzz function, and closed
// by the fuzz target's cleanup (the fuzz function may not use the F).
type lazyEnv struct {
	once     sync.Once
	e        *env
	closeEnv func()
	dir      string
	setup    func(t *testing.T, e *env)
}

func (l *lazyEnv) get(t *testing.T) *env {
	l.once.Do(func() {
		e, closeEnv, err := openEnv(l.dir, envOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.closeEnv = closeEnv
		if l.setup != nil {
			l.setup(t, e)
		}
		l.e = e
	})
	if l.e == nil {
		t.Fatal("setup failed earlier")
	}
	return l.e
}

func newLazyEnv(f *testing.F, setup func(t *testing.T, e *env)) *lazyEnv {
	l := &lazyEnv{dir: f.TempDir(), setup: setup}
	f.Cleanup(func() {
		if l.closeEnv != nil {
			l.closeEnv()
		}
	})
	return l
}

// serve runs one request through the handler and checks the invariants of
// every answer: no 5xx, and a 4xx has the error body.
func serve(t *testing.T, h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body)
	}
	if rec.Code >= 400 {
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("error content type %q", ct)
		}
		checkErrorBody(t, rec.Body.Bytes(), "")
	}
	return rec
}

var createSeeds = []string{
	`{"image":"alpine"}`,
	`{"image":"alpine","cpu":"500m","memory":"256Mi","ttl":60,"env":{"A":"b"}}`,
	`{"image":"alpine","ttl":0}`,
	`{"image":"docker.io/library/alpine:3.20"}`,
	`{"template":"python","templateVersion":2,"overrides":{"cpu":"1","ttl":5}}`,
	`{"image":"Not A Ref!"}`,
	`{"image":"alpine","cpu":"0.0001"}`,
	`{"image":"alpine","memory":"1e30"}`,
	`{"image":"alpine","ttl":9223372036854775807}`,
	`{"image":"alpine","ttl":-1}`,
	`{"image":"alpine","env":{"A=B":"c","":"d"}}`,
	`{"image":"alpine","env":{"A":"\u0000"}}`,
	`{"image":"alpine"}]`,
	`{"image":"alpine"} {}`,
	`{"image":`,
	`null`,
	`[]`,
	`"alpine"`,
	``,
	"\xff\xfe",
}

func FuzzCreateSandbox(f *testing.F) {
	for _, s := range createSeeds {
		f.Add([]byte(s))
	}
	l := newLazyEnv(f, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		e := l.get(t)
		rec := serve(t, e.h, "/api/v1/sandboxes", body)
		if rec.Code >= 300 {
			return
		}
		if rec.Code != http.StatusCreated {
			t.Fatalf("create %q: %d %s", body, rec.Code, rec.Body)
		}
		var sb api.Sandbox
		if err := json.Unmarshal(rec.Body.Bytes(), &sb); err != nil || sb.ID == "" {
			t.Fatalf("create %q answered %s: %v", body, rec.Body, err)
		}
		// Pending: the image is being "pulled" in the background.
		if sb.Status != api.StatusRunning && sb.Status != api.StatusPending {
			t.Errorf("create %q: sandbox is %s (%s)", body, sb.Status, sb.Reason)
		}
		if err := e.m.Delete(context.Background(), sb.ID); err != nil {
			t.Fatalf("delete %s: %v", sb.ID, err)
		}
	})
}

var execSeeds = []string{
	`{"command":["echo","hi"]}`,
	`{"command":["echo","hi"],"timeout":5,"env":{"A":"b"},"cwd":"/workspace","stdin":"x"}`,
	`{"command":["true"],"cwd":"sub/dir"}`,
	`{"command":["echo"],"timeout":18446744074}`,
	`{"command":["echo"],"timeout":-1}`,
	`{"command":["echo","a\u0000b"]}`,
	`{"command":[""]}`,
	`{"command":[]}`,
	`{"command":"echo"}`,
	`{"command":["rm","-rf","/"]}`,
	`{"command":["echo"],"cwd":"../.."}`,
	`{"command":["echo"],"env":{"PATH":"/tmp"}}`,
	`{"command":["echo"]}]`,
	`{}`,
	``,
}

// allowFuzzExec keeps fuzzed commands harmless: only echo and true run,
// found on the sandbox's own PATH.
func allowFuzzExec(_ string, req *agent.ExecRequest) error {
	if req.Shell != "" || len(req.Command) == 0 || (req.Command[0] != "echo" && req.Command[0] != "true") {
		return errors.New("fuzzing runs only echo and true")
	}
	for _, kv := range req.Env {
		if len(kv) >= 5 && kv[:5] == "PATH=" {
			return errors.New("fuzzing keeps PATH")
		}
	}
	return nil
}

func FuzzExec(f *testing.F) {
	for _, s := range execSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	var id string
	l := newLazyEnv(f, func(t *testing.T, e *env) {
		e.rt.SetHooks(fakeruntime.Hooks{Exec: allowFuzzExec})
		id = e.createSandbox(t, `{"image":"alpine"}`).ID
	})
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		e := l.get(t)
		path := "/api/v1/sandboxes/" + id + "/exec"
		if stream {
			path += "/stream"
		}
		rec := serve(t, e.h, path, body)
		if rec.Code >= 300 {
			return
		}
		if stream {
			events := readEvents(t, rec.Body.Bytes())
			if len(events) == 0 || (events[len(events)-1].name != "exit" && events[len(events)-1].name != "error") {
				t.Errorf("stream %q ended with %+v", body, events)
			}
			return
		}
		var res api.ExecResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Errorf("exec %q answered %s: %v", body, rec.Body, err)
		}
	})
}

var sessionSeeds = []string{
	`{"code":"print(1)"}`,
	`{"code":"x","language":"javascript","session_id":"s-1","flavor":"medium","timeout":2.5}`,
	`{"code":"","session_id":"a/b"}`,
	`{"code":"1","timeout":-1}`,
	`{"code":"1","timeout":1e308}`,
	`{"command":"ls -la","session_id":"s","cwd":"/tmp","env":{"A":"1"}}`,
	`{"command":["echo","hi"],"timeout":30}`,
	`{"command":[]}`,
	`{"command":[1]}`,
	`{"command":null}`,
	`{"command":{"argv":["x"]}}`,
	`{"command":"\u0000"}`,
	`{"code":"1"}]`,
	`null`,
	``,
	"\xff\xfe",
}

// FuzzSessionRequests decodes the bodies of POST /sessions/execute and
// /sessions/command as the handlers do, and checks them as the service
// does before it makes anything: nothing panics, and what decodes
// re-encodes to the same request. (Nothing runs: fuzzed code is never
// executed.)
func FuzzSessionRequests(f *testing.F) {
	for _, s := range sessionSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, command bool) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/sessions/execute", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		if command {
			var v api.SessionCommandRequest
			if decode(rec, req, &v) != nil {
				return
			}
			_ = session.CheckCommand(v)
			checkRoundTrip(t, v)
			return
		}
		var v api.SessionExecuteRequest
		if decodeLimit(rec, req, &v, service.MaxCodeBytes+maxJSONBody) != nil {
			return
		}
		_ = session.CheckExecute(v)
		checkRoundTrip(t, v)
	})
}

// checkRoundTrip checks that v encodes to JSON that decodes to v.
func checkRoundTrip[T any](t *testing.T, v T) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %+v: %v", v, err)
	}
	var back T
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if !reflect.DeepEqual(normalize(v), normalize(back)) {
		t.Errorf("round trip of %+v gave %+v", v, back)
	}
}

// normalize makes an empty and a nil env, argv alike.
func normalize(v any) any {
	switch r := v.(type) {
	case api.SessionCommandRequest:
		if len(r.Env) == 0 {
			r.Env = nil
		}
		return r
	}
	return v
}
