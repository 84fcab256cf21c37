package opensandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/jsonbody"
	"github.com/agent2env/agent2env/internal/service"
)

// Execd is what the execd API needs of the sandbox service.
type Execd interface {
	// Authorize checks a sandbox's access token and that it runs.
	Authorize(ctx context.Context, id, token string) error
	ExecStream(ctx context.Context, id string, req api.ExecRequest, start func(), emit func(api.ExecEvent) error) (api.ExecEvent, error)
	UploadFiles(ctx context.Context, id string, files func(put service.PutFile) error) ([]api.FileInfo, error)
	Download(ctx context.Context, id, path string) (io.ReadCloser, int64, error)
}

var _ Execd = (*service.Sandboxes)(nil)

// sandboxUID is the user every command of a sandbox runs as.
const sandboxUID = 1000

// pingWait bounds how long /ping waits for a pending sandbox to run: the
// SDK pings until it answers, and a wait costs it less than a retry.
const pingWait = 10 * time.Second

// keepAlive is how often a command's stream carries a ping event while
// the command is silent, as execd's.
var keepAlive = 3 * time.Second

// serveExecd serves ExecdPrefix + id + "/" + plane + rest: the execd API
// of sandbox id (plane "execd"), or its egress sidecar's ("egress"), both
// with the sandbox's access token.
func (h *Handler) serveExecd(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.EscapedPath(), ExecdPrefix)
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" {
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
		return
	}
	id, err := url.PathUnescape(parts[0])
	if err != nil {
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
		return
	}
	op := "/"
	if len(parts) == 3 {
		op += parts[2]
	}
	if parts[1] != "execd" && parts[1] != "egress" {
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
		return
	}
	if h.cfg.Execd == nil {
		writeError(w, errdefs.NotImplemented("the execd API is not served here"))
		return
	}
	ctx := r.Context()
	token := r.Header.Get(HeaderAccessToken)
	if op == "/ping" {
		err = h.waitRunning(ctx, id, token)
	} else {
		err = h.cfg.Execd.Authorize(ctx, id, token)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if parts[1] == "egress" {
		h.routeEgress(w, r, id, op)
		return
	}
	route := func(method string, f func(w http.ResponseWriter, r *http.Request, id string)) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeErrorStatus(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "method "+r.Method+" is not allowed here; use "+method)
			return
		}
		f(w, r, id)
	}
	switch op {
	case "/ping":
		route(http.MethodGet, func(w http.ResponseWriter, _ *http.Request, _ string) { w.WriteHeader(http.StatusOK) })
	case "/command":
		if r.Method == http.MethodDelete {
			h.interruptCommand(w, r, id)
			return
		}
		route(http.MethodPost, h.command)
	case "/code", "/code/context", "/code/contexts":
		h.routeCode(w, r, id, op)
	case "/session":
		h.routeSession(w, r, id, op)
	case "/metrics", "/metrics/watch":
		if h.cfg.Metrics == nil {
			writeError(w, errdefs.NotImplemented("metrics are not served here"))
			return
		}
		if op == "/metrics" {
			route(http.MethodGet, h.metrics)
		} else {
			route(http.MethodGet, h.watchMetrics)
		}
	case "/files/upload":
		route(http.MethodPost, h.upload)
	case "/files/download":
		route(http.MethodGet, h.download)
	default:
		if fns := filesRoutes[op]; fns != nil {
			h.routeFiles(w, r, id, fns)
			return
		}
		if strings.HasPrefix(op, "/command/") && h.cfg.Commands != nil {
			h.routeCommand(w, r, id, op)
			return
		}
		if strings.HasPrefix(op, "/code/contexts/") {
			h.routeCode(w, r, id, op)
			return
		}
		if strings.HasPrefix(op, "/session/") {
			h.routeSession(w, r, id, op)
			return
		}
		if unsupportedExecd(op) {
			writeError(w, errdefs.NotImplemented("execd %s is not supported by agent2env yet", op))
			return
		}
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
	}
}

// execdPlanned are the execd routes (and route prefixes, ending in "/")
// agent2env does not serve yet: answered 501, not 404.
var execdPlanned = []string{
	"/command/", "/files/", "/directories/",
}

// unsupportedExecd reports whether op is an execd route not served yet.
func unsupportedExecd(op string) bool {
	for _, p := range execdPlanned {
		if op == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(op, p)) {
			return true
		}
	}
	return false
}

// waitRunning authorizes a ping, waiting up to pingWait while sandbox id
// is not running yet.
func (h *Handler) waitRunning(ctx context.Context, id, token string) error {
	ctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	for {
		err := h.cfg.Execd.Authorize(ctx, id, token)
		if !errors.Is(err, errdefs.ErrFailedPrecondition) {
			return err
		}
		sb, gerr := h.cfg.Sandboxes.Get(ctx, id)
		if gerr != nil || sb.Status != api.StatusPending {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// commandRequest is execd's RunCommandRequest.
type commandRequest struct {
	Command    string            `json:"command"`
	Argv       []string          `json:"argv"`
	Cwd        string            `json:"cwd"`
	Background bool              `json:"background"`
	Timeout    *int64            `json:"timeout"` // milliseconds
	UID        *int              `json:"uid"`
	GID        *int              `json:"gid"`
	Envs       map[string]string `json:"envs"`
}

// toAPI checks req and returns agent2env's exec request.
func (req *commandRequest) toAPI() (api.ExecRequest, error) {
	var out api.ExecRequest
	switch {
	case req.Command != "" && len(req.Argv) > 0:
		return out, errdefs.Invalid("give one of command and argv, not both")
	case req.Command != "":
		out.Command = []string{"bash", "-c", req.Command}
	case len(req.Argv) > 0:
		out.Command = req.Argv
	default:
		return out, errdefs.Invalid("command is required")
	}
	if req.GID != nil && req.UID == nil {
		return out, errdefs.Invalid("gid: give uid with it")
	}
	for name, v := range map[string]*int{"uid": req.UID, "gid": req.GID} {
		if v != nil && *v != sandboxUID {
			return out, unsupported(name, "commands run as the sandbox's user, "+strconv.Itoa(sandboxUID))
		}
	}
	// Stock execd puts no timeout on a command unless asked (nor 0): the
	// longest agent2env allows stands for none, where the manager's
	// default would cut a build or an install short.
	maxSecs := int64(service.MaxExecTimeout / time.Second)
	out.Timeout = int(maxSecs)
	if t := req.Timeout; t != nil && *t != 0 {
		if *t < 0 {
			return out, errdefs.Invalid("timeout %d is negative", *t)
		}
		// agent2env's timeouts are whole seconds: round up, never cut a
		// command short. A timeout too large is the service's 400.
		secs := *t / 1000
		if *t%1000 != 0 {
			secs++
		}
		out.Timeout = int(min(secs, maxSecs+1))
	}
	out.Cwd, out.Env = req.Cwd, req.Envs
	return out, nil
}

// streamEvent is an event of execd's streams (docs/opensandbox.md §8).
type streamEvent struct {
	Type           string         `json:"type"`
	Text           string         `json:"text,omitempty"`
	ExecutionCount *int           `json:"execution_count,omitempty"`
	ExecutionTime  *int64         `json:"execution_time,omitempty"`
	Timestamp      int64          `json:"timestamp"`
	Results        map[string]any `json:"results,omitempty"`
	Error          *streamError   `json:"error,omitempty"`
}

// streamError is an error event's error.
type streamError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// commandError is the error event of a command that ended with code, or
// could not run (evalue is then the reason).
func commandError(evalue, traceback string) *streamError {
	return &streamError{Name: "CommandExecError", Value: evalue, Traceback: []string{traceback}}
}

// eventWriter writes one single-line JSON object per frame, flushed at
// once, from any goroutine.
type eventWriter struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	now func() time.Time
}

func (e *eventWriter) write(ev streamEvent) error {
	ev.Timestamp = e.now().UnixMilli()
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write(append(b, '\n', '\n')); err != nil {
		return err
	}
	return http.NewResponseController(e.w).Flush()
}

// startStream commits an event stream's headers (execd's, §8.1) and
// returns its writer.
func (h *Handler) startStream(w http.ResponseWriter) *eventWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &eventWriter{w: w, now: h.cfg.Now}
}

// keepAlive writes a ping event every keepAlive while ctx lasts; a failed
// write cancels. The func it returns stops it and waits until it has.
func (h *Handler) keepAlive(ctx context.Context, ew *eventWriter, cancel context.CancelFunc) func() {
	ctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if ew.write(streamEvent{Type: "ping", Text: "pong"}) != nil {
					cancel()
					return
				}
			}
		}
	}()
	return func() { stop(); <-done }
}

func (h *Handler) command(w http.ResponseWriter, r *http.Request, id string) {
	var body commandRequest
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	req, err := body.toAPI()
	if err != nil {
		writeError(w, err)
		return
	}
	if body.Background {
		if h.cfg.Commands == nil {
			writeError(w, errdefs.NotImplemented("background commands are not served here"))
			return
		}
		h.background(w, r, id, procRequest(req, body))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// DELETE /command?id= of the init event's id cancels it: the agent
	// kills the command's process group.
	execID := newExecutionID()
	h.runs.add(execID, id, cancel)
	defer h.runs.remove(execID)
	var (
		ew        *eventWriter
		start     time.Time
		stopPings = func() {}
		held      = cutRunes{}
	)
	exit, err := h.cfg.Execd.ExecStream(ctx, id, req, func() {
		ew, start = h.startStream(w), h.cfg.Now()
		// Known to GET /command/status/{id} before its id is sent, as
		// stock execd's.
		h.foregrounds.start(id, commandStatus{ID: execID, Content: commandContent(req.Command), Running: true, StartedAt: start})
		if ew.write(streamEvent{Type: "init", Text: execID}) != nil {
			cancel()
			return
		}
		stopPings = h.keepAlive(ctx, ew, cancel)
	}, func(ev api.ExecEvent) error {
		if text := held.whole(ev.Type, ev.Data); text != "" {
			return ew.write(streamEvent{Type: ev.Type, Text: text})
		}
		return nil
	})
	stopPings()
	if ew == nil {
		writeError(w, err)
		return
	}
	for _, typ := range []string{"stdout", "stderr"} {
		if held[typ] != "" {
			_ = ew.write(streamEvent{Type: typ, Text: held[typ]})
		}
	}
	// How it ended, as stock execd's: the exit code and Go's error, which
	// its status keeps too; evalue is the exit code, or the reason the
	// command could not run.
	var (
		code         int
		errText, val string
	)
	switch {
	case err != nil && ctx.Err() != nil:
		// Interrupted, or the client left: the agent killed it.
		code, errText = killedCode, signalError(syscall.SIGKILL)
	case err != nil:
		code, errText, val = 1, err.Error(), err.Error()
	case exit.TimedOut:
		// execd kills the process group: a command a signal ended.
		code, errText = killedCode, "command timed out"
	case exit.Signal != "":
		code, errText = killedCode, signalError(syscall.Signal(exit.ExitCode-128))
	case exit.ExitCode != 0:
		code, errText = exit.ExitCode, "exit status "+strconv.Itoa(exit.ExitCode)
	}
	h.foregrounds.end(execID, code, errText, h.cfg.Now())
	if errText != "" {
		if val == "" {
			val = strconv.Itoa(code)
		}
		_ = ew.write(streamEvent{Type: "error", Error: commandError(val, errText)})
		return
	}
	ms := h.cfg.Now().Sub(start).Milliseconds()
	if exit.Duration > 0 {
		ms = int64(exit.Duration + 0.5)
	}
	_ = ew.write(streamEvent{Type: "execution_complete", ExecutionTime: &ms})
}

// cutRunes holds back, by stream, the start of a UTF-8 character that a
// piece of a command's output cut (the agent reads pipes in pieces of any
// size): an event's text is JSON, which carries whole characters only,
// and the halves of a cut one would each reach the client as U+FFFD.
type cutRunes map[string]string

// whole returns piece, after what was held back of its stream, without
// the start of a character cut at its end, which it holds back.
func (c cutRunes) whole(stream, piece string) string {
	s := c[stream] + piece
	cut := len(s)
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				cut = i
			}
			break
		}
	}
	c[stream] = s[cut:]
	return s[:cut]
}

// newExecutionID names a command's run in its init event.
func newExecutionID() string {
	return requestID(&http.Request{Header: http.Header{}})
}

// uploadMetadata is the metadata part before each file of an upload.
type uploadMetadata struct {
	Path  string  `json:"path"`
	Owner *string `json:"owner"`
	Group *string `json:"group"`
	Mode  *int    `json:"mode"`
	// mode is Mode parsed, defaultMode without it.
	mode fs.FileMode
}

// defaultMode is a file's mode when its metadata gives none.
const defaultMode = 0o644

// parseMode reads a mode written as its octal digits in decimal (755 is
// 0o755; 1777 is 0o777 with the sticky bit, fs.ModeSticky, and 4000 and
// 2000 are setuid and setgid).
func parseMode(m int) (fs.FileMode, error) {
	v, err := strconv.ParseUint(strconv.Itoa(m), 8, 32)
	if err != nil || v > 0o7777 {
		return 0, errdefs.Invalid("mode %d: want octal digits, as 644 or 755", m)
	}
	mode := fs.FileMode(v & 0o777)
	for bit, flag := range map[uint64]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
		if v&bit != 0 {
			mode |= flag
		}
	}
	return mode, nil
}

// upload writes the files of a multipart body of metadata and file pairs,
// each streamed as it arrives, as one change: a body refused at any part
// leaves the sandbox as it was.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request, id string) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, errdefs.WithCode(errdefs.Invalid("the body must be multipart/form-data: %v", err), api.CodeUnsupportedMediaType))
		return
	}
	_, err = h.cfg.Execd.UploadFiles(r.Context(), id, func(put service.PutFile) error {
		var meta *uploadMetadata
		files := 0
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return errdefs.Invalid("read the multipart body: %v", err)
			}
			err = uploadPart(put, part, &meta)
			part.Close()
			if err != nil {
				return err
			}
			if meta == nil {
				files++
			}
		}
		switch {
		case meta != nil:
			return errdefs.Invalid("metadata for %s has no file part after it", meta.Path)
		case files == 0:
			return errdefs.Invalid("no file in the body: send a metadata part, then a file part, per file")
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// uploadPart takes one part: a metadata part is kept in *meta, a file
// part is written where *meta says, which it then clears.
func uploadPart(put service.PutFile, part *multipart.Part, meta **uploadMetadata) error {
	name := part.FormName()
	switch {
	case name == "metadata" && *meta == nil:
		var m uploadMetadata
		raw, err := io.ReadAll(io.LimitReader(part, maxBody))
		if err == nil {
			err = jsonbody.Unmarshal(raw, &m, "the value", false)
		}
		if err != nil {
			return errdefs.Invalid("metadata part: %v", err)
		}
		if m.Path == "" {
			return errdefs.Invalid("metadata part: path is required")
		}
		if (m.Owner != nil && *m.Owner != "") || (m.Group != nil && *m.Group != "") {
			return unsupported("owner", "files belong to the sandbox's user; leave owner and group out")
		}
		// Checked as it arrives, before its file part is written.
		m.mode = defaultMode
		if m.Mode != nil {
			var err error
			if m.mode, err = parseMode(*m.Mode); err != nil {
				return fmt.Errorf("metadata for %s: %w", m.Path, err)
			}
			if m.mode&^fs.ModePerm != 0 {
				return errdefs.Invalid("metadata for %s: mode %d: an upload sets the permission bits only (up to 777); set setuid, setgid or sticky with POST /files/permissions", m.Path, *m.Mode)
			}
		}
		*meta = &m
		return nil
	case name == "metadata":
		return errdefs.Invalid("metadata for %s has no file part after it", (*meta).Path)
	case name == "file" && *meta != nil:
		if err := put((*meta).Path, (*meta).mode, part); err != nil {
			return err
		}
		*meta = nil
		return nil
	case name == "file":
		return errdefs.Invalid("a file part must follow its metadata part")
	default:
		return errdefs.Invalid("unexpected part %q: want metadata and file parts", name)
	}
}
