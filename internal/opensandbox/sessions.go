package opensandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// sessionName names the bash contexts that are execd's bash sessions
// (docs/opensandbox.md §7.2): the /code routes leave them out, and the
// session routes take no other context.
const sessionName = "opensandbox-session"

// sessionPrelude starts every run of a session, on one line so that the
// command's own lines keep their numbers but one. A session is a bash
// kernel, one shell for all its runs; stock execd runs each command as
// a script of its own, where `exit N` ends that run with code N. The
// alias gives `exit` that meaning here (at the run's top level: in a
// function it returns from the function), so that it does not end the
// session's shell and its state. It is set on every run because a shell
// that died (and was started again by the agent) has lost it.
const sessionPrelude = "shopt -s expand_aliases; alias exit=return;"

// kernelExitStatus is the error name of agent2env's bash kernel for code
// that ended with a non-zero status, its value "exit status N"
// (internal/agent/kernels/bash.sh).
const kernelExitStatus = "ExitStatus"

// sessionCreateRequest is execd's CreateSessionRequest.
type sessionCreateRequest struct {
	Cwd string `json:"cwd"`
}

// sessionRunRequest is execd's RunInSessionRequest.
type sessionRunRequest struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd"`
	Timeout int64  `json:"timeout"` // milliseconds; 0: none
}

// routeSession serves op, /session or a path under it, of sandbox id.
func (h *Handler) routeSession(w http.ResponseWriter, r *http.Request, id, op string) {
	if h.cfg.Codes == nil {
		writeError(w, errdefs.NotImplemented("bash sessions are not served here"))
		return
	}
	if op == "/session" {
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost: func(w http.ResponseWriter, r *http.Request) { h.createSession(w, r, id) },
		})
		return
	}
	rest := strings.TrimPrefix(op, "/session/")
	sid, run := strings.CutSuffix(rest, "/run")
	sid, err := url.PathUnescape(sid)
	if err != nil || sid == "" || strings.Contains(sid, "/") {
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
		return
	}
	if run {
		methods(w, r, map[string]http.HandlerFunc{
			http.MethodPost: func(w http.ResponseWriter, r *http.Request) { h.runInSession(w, r, id, sid) },
		})
		return
	}
	methods(w, r, map[string]http.HandlerFunc{
		http.MethodDelete: func(w http.ResponseWriter, r *http.Request) { h.deleteSession(w, r, id, sid) },
	})
}

// createSession answers POST /session: a bash kernel named sessionName,
// in cwd when the body names one (made first, as execd makes it, and
// removed again when the session cannot be made).
func (h *Handler) createSession(w http.ResponseWriter, r *http.Request, id string) {
	var body sessionCreateRequest
	if err := decodeOptionalJSON(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	made := "" // the topmost directory made for cwd
	if body.Cwd != "" {
		if h.cfg.Files == nil {
			writeError(w, errdefs.NotImplemented("a session's cwd needs the files API, which is not served here"))
			return
		}
		var err error
		if made, err = h.missingTop(ctx, id, body.Cwd); err == nil {
			err = h.cfg.Files.Mkdir(ctx, id, body.Cwd)
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
	c, err := h.cfg.Codes.Create(ctx, id, api.CreateContextRequest{Language: api.LanguageBash, WorkingDir: body.Cwd, Name: sessionName})
	if err != nil {
		if made != "" {
			// Best effort: the request's error is what the client needs.
			_ = h.cfg.Files.Remove(context.WithoutCancel(ctx), id, made, true)
		}
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"session_id": c.ContextID})
}

// session returns session sid of sandbox id: a context made by
// createSession, ErrNotFound for any other.
func (h *Handler) session(ctx context.Context, id, sid string) (*api.Context, error) {
	c, err := h.cfg.Codes.Get(ctx, id, sid)
	if err == nil && (c.Name != sessionName || c.Language != api.LanguageBash) {
		err = errdefs.ErrNotFound
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.WithCode(errdefs.NotFound("sandbox %s has no session %s", id, sid), "CONTEXT_NOT_FOUND")
	}
	return c, err
}

func (h *Handler) deleteSession(w http.ResponseWriter, r *http.Request, id, sid string) {
	if _, err := h.session(r.Context(), id, sid); err != nil {
		writeError(w, err)
		return
	}
	if _, err := h.cfg.Codes.Delete(r.Context(), id, sid); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// sessionCode is the code a run sends to the session's shell: the
// prelude, a cd to cwd when given (the session stays there, as execd's
// does), then the command.
func sessionCode(command, cwd string) string {
	code := sessionPrelude
	if cwd != "" {
		code += " cd -- " + shellQuote(cwd) + " || return;"
	}
	return code + "\n" + command
}

// shellQuote quotes s for bash, in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runInSession answers POST /session/{sid}/run: the command in the
// session's shell, streamed as /command streams (init, stdout and stderr,
// then execution_complete or a CommandExecError with the exit code). Runs
// of one session take turns: a run sent while another runs waits for it,
// in order of arrival (the kernel runs one execution at a time); its
// timeout counts from its start.
func (h *Handler) runInSession(w http.ResponseWriter, r *http.Request, id, sid string) {
	var body sessionRunRequest
	if err := decodeJSONLimit(w, r, &body, service.MaxCodeBytes+maxBody); err != nil {
		writeError(w, err)
		return
	}
	if strings.TrimSpace(body.Command) == "" {
		writeError(w, errdefs.Invalid("command is required"))
		return
	}
	timeout := float64(codeTimeout)
	switch ms := body.Timeout; {
	case ms < 0:
		writeError(w, errdefs.Invalid("timeout %d is negative", ms))
		return
	case ms > 0 && ms < codeTimeout*1000:
		timeout = float64(ms) / 1000
	}
	ctx := r.Context()
	if _, err := h.session(ctx, id, sid); err != nil {
		writeError(w, err)
		return
	}
	run, err := h.cfg.Codes.Stream(ctx, id, sid, api.ExecuteRequest{Code: sessionCode(body.Command, body.Cwd), Timeout: timeout})
	if err != nil {
		writeError(w, err)
		return
	}
	ew := h.startStream(w)
	if ew.write(streamEvent{Type: "init", Text: sid}) != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopPings := h.keepAlive(ctx, ew, cancel)
	start := h.cfg.Now()
	resp, err := run(ctx, codeSink{ew: ew})
	stopPings()
	if err != nil {
		_ = ew.write(streamEvent{Type: "error", Error: commandError(err.Error(), err.Error())})
		return
	}
	if resp.Error != nil {
		_ = ew.write(streamEvent{Type: "error", Error: sessionError(resp.Error)})
		return
	}
	ms := int64(resp.ExecutionTime*1000 + 0.5)
	if resp.ExecutionTime == 0 {
		ms = h.cfg.Now().Sub(start).Milliseconds()
	}
	_ = ew.write(streamEvent{Type: "execution_complete", ExecutionTime: &ms})
}

// sessionError is the error event of a session run that did not succeed:
// a CommandExecError whose evalue is the exit code, as the SDKs read it
// (a syntax error is bash's 2, a timeout -1 as /command's); an error of
// the kernel itself (it died, ran out of memory, its sandbox is gone)
// keeps its name and says why.
func sessionError(e *api.ExecutionError) *streamError {
	switch e.Name {
	case kernelExitStatus:
		if code, err := strconv.Atoi(strings.TrimPrefix(e.Value, "exit status ")); err == nil {
			return commandError(strconv.Itoa(code), e.Value)
		}
	case "SyntaxError":
		return commandError("2", e.Value)
	case api.ErrorNameTimeout:
		return commandError("-1", "command timed out")
	case "KeyboardInterrupt":
		return commandError("130", "interrupted")
	}
	return codeError(e)
}

// decodeOptionalJSON is decodeJSON for a body that may be left out: an
// empty body leaves v as it is.
func decodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			return err // 413, as decodeJSON's
		}
		return errdefs.Invalid("read the body: %v", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return errdefs.WithCode(errdefs.Invalid("the body must be application/json"), api.CodeUnsupportedMediaType)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return decodeJSON(w, r, v)
}
