package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/jsonbody"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/utf8cut"
)

// The terminal's WebSocket: its keepalive and the largest message it
// reads (a big paste).
const (
	terminalWriteWait = 10 * time.Second
	terminalReadLimit = 1<<20 + 64
	// terminalChunk is the most output one message carries.
	terminalChunk = 32 << 10
)

// terminalPingPeriod is how often the server pings (a variable for the
// tests); a client that answers none of two is dropped.
var terminalPingPeriod = 30 * time.Second

func terminalPongWait() time.Duration { return 2*terminalPingPeriod + terminalWriteWait }

var terminalUpgrader = websocket.Upgrader{
	// Only the Kubernetes protocol is ever selected: never the entry
	// carrying a key.
	Subprotocols: []string{api.TerminalProtocolK8s},
	// BrowserGuard checks Host and Origin before the request gets here.
	CheckOrigin:      func(*http.Request) bool { return true },
	HandshakeTimeout: 10 * time.Second,
}

// terminalRequest reads the query of GET .../exec/interactive. tty
// defaults to the dialect's default: true for LiteBoxd's, false for
// Kubernetes'.
func terminalRequest(r *http.Request, k8s bool) (api.TerminalRequest, error) {
	q := r.URL.Query()
	req := api.TerminalRequest{Command: q["command"], TTY: !k8s, Cwd: q.Get("cwd")}
	if v := q.Get("tty"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return req, errdefs.Invalid("tty %q is not a boolean", v)
		}
		req.TTY = b
	}
	// 0 is the default size, as LiteBoxd takes it: its Go SDK sends
	// rows=0&cols=0 for a size the caller did not set.
	for name, dst := range map[string]*uint16{"rows": &req.Rows, "cols": &req.Cols} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return req, errdefs.Invalid("%s %q is not a size from 0 (the default) to 65535", name, v)
			}
			*dst = uint16(n)
		}
	}
	if !req.TTY {
		// A size is a terminal's: LiteBoxd ignores one given without,
		// and its CLI's exec -i sends its own (80 x 24) with tty=false.
		req.Rows, req.Cols = 0, 0
		if !k8s && len(req.Command) == 0 {
			// LiteBoxd runs sh when no command is given, a tty or not;
			// without one there is no login shell to run.
			req.Command = []string{"sh"}
		}
	}
	for _, kv := range q["env"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return req, errdefs.Invalid("env %q is not KEY=VALUE", kv)
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	return req, nil
}

// offersProtocol reports whether the client offered subprotocol p.
func offersProtocol(r *http.Request, p string) bool {
	for _, v := range websocket.Subprotocols(r) {
		if v == p {
			return true
		}
	}
	return false
}

// terminalTicket serves POST
// /api/v1/sandboxes/{id}/exec/interactive/ticket: a one-time ticket for a
// browser's WebSocket to the terminal, with the tenant of the request's
// key (AuthMiddlewareWithTickets redeems it).
func (s *Server) terminalTicket(w http.ResponseWriter, r *http.Request) {
	t, err := s.sandboxes.TerminalTicket(r.Context(), r.PathValue("id"), auth.TenantOf(r.Context()))
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, t)
}

// terminal serves GET /api/v1/sandboxes/{id}/exec/interactive: an
// interactive process over a WebSocket, in Kubernetes' v5.channel.k8s.io
// protocol when the client offers it, otherwise in LiteBoxd's JSON
// frames. Bad requests and a sandbox that does not run are refused
// before the upgrade; the process ends with the connection.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		writeError(w, errdefs.Invalid("this endpoint speaks WebSocket only: send an upgrade request"))
		return
	}
	k8s := offersProtocol(r, api.TerminalProtocolK8s)
	req, err := terminalRequest(r, k8s)
	if err == nil {
		err = s.sandboxes.ValidateTerminal(req)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if err := spendTicket(r); err != nil {
		refuseAuth(w, err)
		return
	}
	sess := newTerminalSession(k8s, -1)
	t, err := s.sandboxes.Terminal(r.Context(), r.PathValue("id"), req, sess.output)
	if err != nil {
		writeError(w, err)
		return
	}
	s.serveTerminal(w, r, sess, t)
}

// serveTerminal upgrades the connection and pumps the session until its
// end; the terminal is closed after.
func (s *Server) serveTerminal(w http.ResponseWriter, r *http.Request, sess *terminalSession, t *service.Terminal) {
	defer t.Close()
	conn, err := terminalUpgrader.Upgrade(w, r, nil)
	sess.conn = conn
	close(sess.ready)
	if err != nil {
		return // the upgrader answered
	}
	defer conn.Close()
	s.runTerminal(sess, t)
}

// terminalSession is one WebSocket; its writes are serialized.
type terminalSession struct {
	// ready is closed once conn is set (nil: the upgrade failed): output
	// may come before.
	ready chan struct{}
	conn  *websocket.Conn
	d     terminalDialect
	wmu   sync.Mutex
	// out and errOut keep each stream's UTF-8 characters whole.
	out, errOut *utf8cut.Writer
	// next is the offset of the stdout byte the client expects next, for
	// a persistent terminal's attachment; -1: offsets are not told.
	next int64
	// sendErr is the error of the client's end, once it failed.
	sendErr error
	// refused is why a message of the client's was refused, once one
	// was: the session ends with it alone, not with the error of the
	// stream its end cut.
	refused atomic.Pointer[error]
	// gone is set once the client went away (its connection closed or
	// failed): the stream the session's end cuts is no failure to log.
	gone atomic.Bool
}

// newTerminalSession returns a session in the dialect the client chose
// (k8s or LiteBoxd's JSON); since, when not negative, is where a
// persistent terminal's output starts: the client is told the offset
// wherever the output does not go on from what it expects.
func newTerminalSession(k8s bool, since int64) *terminalSession {
	var d terminalDialect = jsonDialect{}
	if k8s {
		d = k8sDialect{}
	}
	sess := &terminalSession{d: d, ready: make(chan struct{}), next: since}
	sess.out = &utf8cut.Writer{Emit: func(p []byte) error { return sess.send(d.output(api.TerminalStreamStdout, p)) }}
	sess.errOut = &utf8cut.Writer{Emit: func(p []byte) error { return sess.send(d.output(api.TerminalStreamStderr, p)) }}
	return sess
}

// output is the terminal's service.TerminalOutput.
func (sess *terminalSession) output(stream byte, at int64, p []byte) error {
	if stream == api.TerminalStreamStderr {
		return sess.record(sess.errOut.Write(p))
	}
	if sess.next >= 0 {
		if at != sess.next {
			// Output was skipped: what is held back of a character
			// goes as it is, then where the output resumes.
			if err := sess.record(0, sess.out.Flush()); err != nil {
				return err
			}
			if err := sess.record(0, sess.send(sess.d.offset(at))); err != nil {
				return err
			}
		}
		sess.next = at + int64(len(p))
	}
	return sess.record(sess.out.Write(p))
}

// record keeps the first error of the client's end.
func (sess *terminalSession) record(_ int, err error) error {
	if err != nil && sess.sendErr == nil {
		sess.sendErr = err
	}
	return err
}

// send writes one message. It blocks while the client does not read,
// which holds the process's output back: nothing queues in the daemon.
func (sess *terminalSession) send(typ int, p []byte) error {
	<-sess.ready
	if sess.conn == nil {
		return errors.New("no WebSocket")
	}
	sess.wmu.Lock()
	defer sess.wmu.Unlock()
	return sess.conn.WriteMessage(typ, p)
}

// runTerminal pumps the session until the process has ended and its exit
// is sent, the attachment ended, or the client went away.
func (s *Server) runTerminal(sess *terminalSession, t *service.Terminal) {
	conn := sess.conn
	pingPeriod := terminalPingPeriod
	conn.SetReadLimit(terminalReadLimit)
	conn.SetReadDeadline(time.Now().Add(terminalPongWait()))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(terminalPongWait())) })
	// The client's close is answered below, once the sandbox has let go
	// of the attachment (t.Close waits for that), not at once: a client
	// that waits for the answer may attach as the writer again at once.
	conn.SetCloseHandler(func(int, string) error { return nil })
	done := make(chan struct{})
	defer close(done)
	go func() { // keepalive
		tick := time.NewTicker(pingPeriod)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(terminalWriteWait)); err != nil {
					// The client is gone. The input may be stuck sending
					// to a process that reads none, where it would not
					// see that: end the process, or the attachment, here.
					sess.gone.Store(true)
					conn.Close()
					t.Close()
					return
				}
			}
		}
	}()
	inputDone := make(chan struct{})
	go func() { // input
		defer close(inputDone)
		for {
			typ, p, err := conn.ReadMessage()
			if err != nil {
				// The client went away (a message past the limit is its
				// fault, which it is told): end the process, or the
				// attachment.
				sess.gone.Store(!errors.Is(err, websocket.ErrReadLimit))
				t.Close()
				return
			}
			conn.SetReadDeadline(time.Now().Add(terminalPongWait()))
			if err := sess.d.input(t, typ, p); err != nil {
				sess.refused.Store(&err)
				t.Close()
				return
			}
		}
	}()
	exit, err := t.Wait()
	if refused := sess.refused.Load(); refused != nil {
		err = *refused
	}
	if err == nil {
		// The agent wrote all of the output before its end.
		err = errors.Join(sess.record(0, sess.out.Flush()), sess.record(0, sess.errOut.Flush()))
	}
	switch {
	case sess.sendErr != nil, sess.gone.Load():
		return // the client went away
	case err != nil:
		if public := terminalFailure(err); public != err {
			s.log.Warn("terminal: the stream from the sandbox's agent failed", "err", err)
			err = public
		}
		sess.send(sess.d.fail(err)) // refused, failed, or taken over
	default:
		sess.send(sess.d.exit(exit))
	}
	sess.wmu.Lock()
	conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(terminalWriteWait))
	sess.wmu.Unlock()
	// Give the client a moment to close in turn, then drop the connection.
	conn.SetReadDeadline(time.Now().Add(terminalWriteWait))
	<-inputDone
}

// terminalFailure is what the client is told of err, a session's end: a
// failed stream from the agent only that it ended (how is the daemon's
// business, and its message names the agent's socket on the host), unless
// the sandbox's record says why (it was deleted or stopped meanwhile: the
// error has the wire code of that, as agent.Client's explanation gives
// it); any other error as it is.
func terminalFailure(err error) error {
	if errors.Is(err, errdefs.ErrUnavailable) && errdefs.Code(err) == "" {
		return errdefs.Unavailable("the connection to the sandbox's agent ended before the process did")
	}
	return err
}

// terminalDialect is a wire format of the terminal's WebSocket.
type terminalDialect interface {
	// output is a message of output of stream 1 (stdout) or 2 (stderr).
	output(stream byte, p []byte) (int, []byte)
	// exit is the message that says how the process ended.
	exit(api.TerminalExit) (int, []byte)
	// fail is the message that says the session failed.
	fail(error) (int, []byte)
	// offset is the message that says where in a persistent terminal's
	// output the next stdout byte lies.
	offset(at int64) (int, []byte)
	// input applies a message from the client.
	input(t *service.Terminal, typ int, p []byte) error
}

// k8sDialect is v5.channel.k8s.io.
type k8sDialect struct{}

func (k8sDialect) output(stream byte, p []byte) (int, []byte) {
	return websocket.BinaryMessage, append([]byte{stream}, p...)
}

// k8sStatus is the part of Kubernetes' metav1.Status the exit status uses.
type k8sStatus struct {
	Metadata struct{}          `json:"metadata"`
	Status   string            `json:"status"`
	Message  string            `json:"message,omitempty"`
	Reason   string            `json:"reason,omitempty"`
	Details  *k8sStatusDetails `json:"details,omitempty"`
	Code     int               `json:"code,omitempty"`
}

type k8sStatusDetails struct {
	Causes []k8sStatusCause `json:"causes"`
}

// k8sStatusCause is a metav1.StatusCause, whose type is sent as
// "reason".
type k8sStatusCause struct {
	Type    string `json:"reason"`
	Message string `json:"message"`
}

func (k8sDialect) status(st k8sStatus) (int, []byte) {
	b, _ := json.Marshal(st)
	return websocket.BinaryMessage, append([]byte{api.TerminalStreamError}, b...)
}

func (d k8sDialect) exit(e api.TerminalExit) (int, []byte) {
	if e.ExitCode == 0 {
		return d.status(k8sStatus{Status: "Success"})
	}
	return d.status(k8sStatus{
		Status: "Failure", Reason: "NonZeroExitCode", Code: http.StatusInternalServerError,
		Message: fmt.Sprintf("command terminated with non-zero exit code: %d", e.ExitCode),
		Details: &k8sStatusDetails{Causes: []k8sStatusCause{{Type: "ExitCode", Message: strconv.Itoa(e.ExitCode)}}},
	})
}

func (d k8sDialect) fail(err error) (int, []byte) {
	status, code := errdefs.HTTPStatus(err)
	return d.status(k8sStatus{Status: "Failure", Reason: k8sReason(status, code), Message: err.Error(), Code: status})
}

// k8sReason is the metav1.StatusReason of a failure of status and code.
func k8sReason(status int, code string) string {
	if code == api.CodeTerminalTakenOver {
		return code
	}
	if r, ok := k8sReasons[status]; ok {
		return r
	}
	if status < http.StatusInternalServerError {
		return "BadRequest"
	}
	return "InternalError"
}

// k8sReasons are the metav1.StatusReason of the statuses a session's
// failure may have, beyond BadRequest (another 4xx) and InternalError
// (another 5xx).
var k8sReasons = map[int]string{
	http.StatusNotFound:           "NotFound",
	http.StatusConflict:           "Conflict",
	http.StatusTooManyRequests:    "TooManyRequests",
	http.StatusServiceUnavailable: "ServiceUnavailable",
}

func (k8sDialect) offset(at int64) (int, []byte) {
	return websocket.BinaryMessage, strconv.AppendInt([]byte{api.TerminalStreamOffset}, at, 10)
}

func (k8sDialect) input(t *service.Terminal, typ int, p []byte) error {
	if typ != websocket.BinaryMessage || len(p) == 0 {
		return errdefs.Invalid("v5.channel.k8s.io takes binary messages that start with their stream")
	}
	switch p[0] {
	case api.TerminalStreamStdin:
		_, err := t.Write(p[1:])
		return ignoreEnded(err)
	case api.TerminalStreamResize:
		var size struct{ Width, Height uint16 }
		if err := decodeFrame(p[1:], &size); err != nil {
			return fmt.Errorf("resize: %w", err)
		}
		if size.Width == 0 || size.Height == 0 {
			return nil // a terminal not drawn yet
		}
		return ignoreEnded(t.Resize(size.Height, size.Width))
	case api.TerminalStreamClose:
		if len(p) == 2 && p[1] == api.TerminalStreamStdin {
			return ignoreEnded(t.CloseWrite())
		}
		return nil
	}
	return errdefs.Invalid("stream %d takes no input", p[0])
}

// jsonDialect is LiteBoxd's: text messages of JSON objects.
type jsonDialect struct{}

// jsonFrame is a message of LiteBoxd's terminal protocol: input (data),
// resize (cols, rows), output (data; stream "stderr" for a process
// without tty's stderr, an agent2env addition), exit (exitCode, always
// sent) and error (message; code, an agent2env addition, its wire code),
// and, on a persistent terminal's attachment (agent2env's), offset.
type jsonFrame struct {
	Type     string `json:"type"`
	Data     string `json:"data,omitempty"`
	Stream   string `json:"stream,omitempty"`
	Cols     uint16 `json:"cols,omitempty"`
	Rows     uint16 `json:"rows,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Message  string `json:"message,omitempty"`
	Code     string `json:"code,omitempty"`
	Offset   *int64 `json:"offset,omitempty"`
}

func (jsonDialect) frame(f jsonFrame) (int, []byte) {
	b, _ := json.Marshal(f)
	return websocket.TextMessage, b
}

func (d jsonDialect) output(stream byte, p []byte) (int, []byte) {
	f := jsonFrame{Type: "output", Data: string(p)}
	if stream == api.TerminalStreamStderr {
		f.Stream = "stderr"
	}
	return d.frame(f)
}

func (d jsonDialect) exit(e api.TerminalExit) (int, []byte) {
	return d.frame(jsonFrame{Type: "exit", ExitCode: &e.ExitCode, Signal: e.Signal})
}

func (d jsonDialect) fail(err error) (int, []byte) {
	_, code := errdefs.Classify(err)
	return d.frame(jsonFrame{Type: "error", Message: err.Error(), Code: code})
}

func (d jsonDialect) offset(at int64) (int, []byte) {
	return d.frame(jsonFrame{Type: "offset", Offset: &at})
}

func (jsonDialect) input(t *service.Terminal, _ int, p []byte) error {
	var f jsonFrame
	if err := decodeFrame(p, &f); err != nil {
		return fmt.Errorf("a message is not a terminal frame: %w", err)
	}
	switch f.Type {
	case "input":
		_, err := t.Write([]byte(f.Data))
		return ignoreEnded(err)
	case "resize":
		if f.Cols == 0 || f.Rows == 0 {
			return nil
		}
		return ignoreEnded(t.Resize(f.Rows, f.Cols))
	case "eof":
		return ignoreEnded(t.CloseWrite())
	}
	return nil // LiteBoxd ignores what it does not know
}

// decodeFrame decodes a client's JSON message into v, refusing it in the
// protocol's names, its members', rather than v's Go types and fields,
// and JSON that does not parse by where and what in plain words (both of
// which json.Unmarshal's errors name in Go's words).
func decodeFrame(p []byte, v any) error {
	if err := json.Unmarshal(p, v); err != nil {
		return errdefs.Invalid("%v", jsonbody.Explain(jsonbody.Locate(err, p), "a frame"))
	}
	return nil
}

// ignoreEnded drops the error of input sent as the process ends: its
// output and exit still come.
func ignoreEnded(err error) error {
	if errors.Is(err, errdefs.ErrUnavailable) || errors.Is(err, errdefs.ErrFailedPrecondition) {
		return nil
	}
	return err
}
