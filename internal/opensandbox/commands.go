package opensandbox

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Commands runs execd's background commands (docs/opensandbox.md §7.1)
// as the sandbox service's background processes.
type Commands interface {
	StartProc(ctx context.Context, id string, req service.ProcRequest) (service.Proc, error)
	Proc(ctx context.Context, id, pid string) (service.Proc, error)
	ProcOutput(ctx context.Context, id, pid string, opts service.ProcOutputOptions, stdout, stderr io.Writer) (service.ProcOutputResult, error)
	SignalProc(ctx context.Context, id, pid, sig string) error
}

var _ Commands = (*service.Sandboxes)(nil)

// HeaderTailCursor carries the cursor a background command's next logs
// read passes, as execd's.
const HeaderTailCursor = "EXECD-COMMANDS-TAIL-CURSOR"

// interruptGrace is how long an interrupted command has to end after
// SIGTERM before it is killed.
var interruptGrace = 3 * time.Second

// procRequest is the background process of a checked exec request; the
// timeout is req's in milliseconds, not rounded to seconds.
func procRequest(req api.ExecRequest, body commandRequest) service.ProcRequest {
	out := service.ProcRequest{Command: req.Command, Cwd: req.Cwd, Env: req.Env}
	if body.Timeout != nil {
		// Past the maximum (the service's 400) without overflowing.
		out.Timeout = service.MaxExecTimeout + time.Millisecond
		if ms := *body.Timeout; ms <= service.MaxExecTimeout.Milliseconds() {
			out.Timeout = time.Duration(ms) * time.Millisecond
		}
	}
	return out
}

// background starts a background command and answers as execd: init with
// the command's id, then execution_complete at once.
func (h *Handler) background(w http.ResponseWriter, r *http.Request, id string, req service.ProcRequest) {
	start := h.cfg.Now()
	p, err := h.cfg.Commands.StartProc(r.Context(), id, req)
	if err != nil {
		writeError(w, err)
		return
	}
	ew := h.startStream(w)
	if ew.write(streamEvent{Type: "init", Text: p.ID}) != nil {
		return
	}
	ms := h.cfg.Now().Sub(start).Milliseconds()
	_ = ew.write(streamEvent{Type: "execution_complete", ExecutionTime: &ms})
}

// commandStatus is execd's CommandStatusResponse.
type commandStatus struct {
	ID         string     `json:"id"`
	Content    string     `json:"content"`
	Running    bool       `json:"running"`
	ExitCode   *int       `json:"exit_code"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// commandContent is the command text of argv: the script of bash -c, the
// words joined otherwise.
func commandContent(argv []string) string {
	if len(argv) == 3 && argv[0] == "bash" && argv[1] == "-c" {
		return argv[2]
	}
	return strings.Join(argv, " ")
}

// killedCode is the exit code stock execd reports for a command a signal
// ended, its timeout's included: Go's os/exec, which it runs commands
// with, has -1 for it.
const killedCode = -1

// signalError is how Go's os/exec, and so stock execd, words the end of
// a command that sig ended ("signal: killed").
func signalError(sig syscall.Signal) string {
	return "signal: " + sig.String()
}

// statusOf is p as execd's status: a command a signal ended (an
// interrupt, a timeout, the out-of-memory killer) has exit code -1.
func statusOf(p service.Proc) commandStatus {
	st := commandStatus{ID: p.ID, Content: commandContent(p.Command), Running: p.Running, StartedAt: p.Started}
	if !p.Running {
		code, ended := p.ExitCode, p.Ended
		switch {
		case p.TimedOut:
			code, st.Error = killedCode, "command timed out"
		case p.Signal != "":
			code, st.Error = killedCode, signalError(syscall.Signal(p.ExitCode-128))
		case code != 0:
			st.Error = "exit status " + strconv.Itoa(code)
		}
		st.ExitCode, st.FinishedAt = &code, &ended
	}
	return st
}

// commandStatus answers GET /command/status/{pid}, of a foreground
// command (by its init event's id) or a background one.
func (h *Handler) commandStatus(w http.ResponseWriter, r *http.Request, id, pid string) {
	if st, ok := h.foregrounds.get(id, pid); ok {
		writeJSON(w, http.StatusOK, st)
		return
	}
	p, err := h.cfg.Commands.Proc(r.Context(), id, pid)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, statusOf(p))
}

// commandLogs answers GET /command/{pid}/logs?cursor=: the output (stdout
// and stderr together) from byte offset cursor on, as text, with the
// cursor to pass next in HeaderTailCursor. Output no longer kept is
// skipped. A foreground command's is a 400, as stock execd's: its output
// went to its stream.
func (h *Handler) commandLogs(w http.ResponseWriter, r *http.Request, id, pid string) {
	if _, ok := h.foregrounds.get(id, pid); ok {
		writeError(w, errdefs.Invalid("command %s is not running in background: its output went to its stream", pid))
		return
	}
	var since int64
	if c := r.URL.Query().Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 0 {
			writeError(w, errdefs.Invalid("cursor %q is not a byte offset", c))
			return
		}
		since = n
	}
	var buf bytes.Buffer
	res, err := h.cfg.Commands.ProcOutput(r.Context(), id, pid, service.ProcOutputOptions{Since: since}, &buf, &buf)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(HeaderTailCursor, strconv.FormatInt(res.Next, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// interruptCommand answers DELETE /command?id=. A background command's
// process group is sent SIGTERM, then SIGKILL if it has not ended within
// interruptGrace, as stock execd's; it stays known, for its status and
// logs. A foreground command (or code run) in flight on this daemon is
// cancelled, which kills its process group at once. It answers once the
// command has ended (or the kill is sent), at once for an ended one.
func (h *Handler) interruptCommand(w http.ResponseWriter, r *http.Request, id string) {
	pid := r.URL.Query().Get("id")
	if pid == "" {
		writeError(w, missingQuery("id"))
		return
	}
	if done := h.runs.interrupt(id, pid); done != nil {
		select {
		case <-done:
		case <-time.After(interruptGrace):
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	if _, ok := h.foregrounds.get(id, pid); ok {
		w.WriteHeader(http.StatusOK)
		return
	}
	if h.cfg.Commands == nil {
		writeError(w, errdefs.NotImplemented("background commands are not served here"))
		return
	}
	ctx := r.Context()
	p, err := h.cfg.Commands.Proc(ctx, id, pid)
	if err != nil {
		writeError(w, err)
		return
	}
	if p.Running {
		// The client leaving does not stop the interrupt half way, with a
		// command that ignores SIGTERM left running for good.
		if err := h.interrupt(context.WithoutCancel(ctx), id, pid); err != nil {
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// interrupt sends SIGTERM to command pid of sandbox id, and SIGKILL once
// interruptGrace has passed with it still running.
func (h *Handler) interrupt(ctx context.Context, id, pid string) error {
	if err := h.cfg.Commands.SignalProc(ctx, id, pid, "TERM"); err != nil {
		return err
	}
	deadline := time.Now().Add(interruptGrace)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		p, err := h.cfg.Commands.Proc(ctx, id, pid)
		if err != nil {
			return err
		}
		if !p.Running {
			return nil
		}
	}
	return h.cfg.Commands.SignalProc(ctx, id, pid, "KILL")
}

// routeCommand serves /command/status/{pid} and /command/{pid}/logs.
func (h *Handler) routeCommand(w http.ResponseWriter, r *http.Request, id, op string) {
	rest := strings.TrimPrefix(op, "/command/")
	var pid string
	var serve func(w http.ResponseWriter, r *http.Request, id, pid string)
	if s, ok := strings.CutPrefix(rest, "status/"); ok && !strings.Contains(s, "/") {
		pid, serve = s, h.commandStatus
	} else if s, ok := strings.CutSuffix(rest, "/logs"); ok && !strings.Contains(s, "/") {
		pid, serve = s, h.commandLogs
	}
	pid, err := url.PathUnescape(pid)
	if serve == nil || pid == "" || err != nil {
		writeError(w, errdefs.NotFound("no such route: %s", r.URL.Path))
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeErrorStatus(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "method "+r.Method+" is not allowed here; use GET")
		return
	}
	serve(w, r, id, pid)
}
