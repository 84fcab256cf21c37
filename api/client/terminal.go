package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
)

// Terminal is an interactive process in a sandbox, over the daemon's
// WebSocket in Kubernetes' v5.channel.k8s.io protocol: Read is its output
// (stdout, and stderr unless TerminalOptions.Stderr takes it), Write its
// input. A one-shot terminal (Terminal) ends its process when it exits or
// is closed; an attachment to a persistent terminal (AttachTerminal)
// detaches when closed, and the terminal goes on. Read, Write, CloseWrite
// and Resize may be called from different goroutines.
type Terminal struct {
	conn   *websocket.Conn
	stderr io.Writer
	wmu    sync.Mutex
	// chunks carries stdout to Read, each with its offset; closed at the
	// end of the output.
	chunks  chan termChunk
	closing chan struct{}
	// once makes Close's work happen once; closeErr is what it returned.
	once     sync.Once
	closeErr error
	// cur is what Read has left of the chunk it took; offset is the
	// offset of cur's first byte.
	rmu    sync.Mutex
	cur    []byte
	curOut bool // cur is stdout, whose bytes Offset counts
	offset atomic.Int64
	done   chan struct{}
	// exit and err are final once done is closed.
	exit api.TerminalExit
	err  error
}

// termChunk is stdout that starts at offset at.
type termChunk struct {
	at int64
	p  []byte
}

// ErrTerminalTakenOver is the error of Wait (and Read) when another
// client took over the writer's place of the persistent terminal this one
// was attached to as writer.
var ErrTerminalTakenOver = errors.New("another client took over the terminal")

// TerminalOptions choose where a Terminal's stderr goes.
type TerminalOptions struct {
	// Stderr, when set, receives the stderr of a process without tty;
	// otherwise Read returns it with stdout.
	Stderr io.Writer
}

// Terminal starts req in sandbox id and connects to it. ctx bounds the
// connecting only: Close ends the terminal.
func (s *SandboxService) Terminal(ctx context.Context, id string, req api.TerminalRequest, opts TerminalOptions) (*Terminal, error) {
	q := url.Values{"command": req.Command, "tty": {strconv.FormatBool(req.TTY)}}
	if req.Rows > 0 {
		q.Set("rows", strconv.Itoa(int(req.Rows)))
	}
	if req.Cols > 0 {
		q.Set("cols", strconv.Itoa(int(req.Cols)))
	}
	if req.Cwd != "" {
		q.Set("cwd", req.Cwd)
	}
	for k, v := range req.Env {
		q.Add("env", k+"="+v)
	}
	p, err := sandboxPath(id, "/exec/interactive")
	if err != nil {
		return nil, wrapf(err, "connect to a terminal")
	}
	return s.dialTerminal(ctx, p, q, 0, opts.Stderr, "connect to a terminal in sandbox "+id)
}

// dialTerminal opens the WebSocket of path?q; its output starts at
// offset since.
func (s *SandboxService) dialTerminal(ctx context.Context, path string, q url.Values, since int64, stderr io.Writer, what string) (*Terminal, error) {
	u := *s.c.base
	u.Path += apiPrefix + path
	u.RawQuery = q.Encode()
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	d := websocket.Dialer{
		Subprotocols:     []string{api.TerminalProtocolK8s},
		HandshakeTimeout: 30 * time.Second,
		Proxy:            http.ProxyFromEnvironment,
	}
	if tr, ok := s.c.hc.Transport.(*http.Transport); ok && tr != nil {
		d.TLSClientConfig = tr.TLSClientConfig
		d.Proxy = tr.Proxy
		d.NetDialContext = tr.DialContext
	}
	header := http.Header{}
	for k, vs := range s.c.header {
		header[k] = vs
	}
	conn, resp, err := d.DialContext(ctx, u.String(), header)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, wrapf(readError(resp), "%s", what)
		}
		return nil, wrapf(err, "%s", what)
	}
	if conn.Subprotocol() != api.TerminalProtocolK8s {
		conn.Close()
		return nil, fmt.Errorf("%s: the daemon does not speak %s", what, api.TerminalProtocolK8s)
	}
	conn.SetReadLimit(1 << 20)
	t := &Terminal{conn: conn, stderr: stderr, chunks: make(chan termChunk), closing: make(chan struct{}), done: make(chan struct{})}
	t.offset.Store(since)
	go t.receive(since)
	return t, nil
}

// receive delivers the output until the exit status and the close.
func (t *Terminal) receive(next int64) {
	defer close(t.done)
	defer close(t.chunks)
	gotExit := false
	for {
		_, p, err := t.conn.ReadMessage()
		if err != nil {
			if !gotExit {
				t.err = wrapf(err, "terminal: the connection ended before the process")
			} // else the exit was said; a close not said cleanly loses nothing
			break
		}
		if len(p) == 0 {
			continue
		}
		switch p[0] {
		case api.TerminalStreamStdout:
			t.deliver(termChunk{at: next, p: p[1:]})
			next += int64(len(p) - 1)
		case api.TerminalStreamStderr:
			if t.stderr == nil {
				t.deliver(termChunk{at: -1, p: p[1:]})
			} else if _, werr := t.stderr.Write(p[1:]); werr != nil {
				err = fmt.Errorf("terminal: copy stderr: %w", werr)
			}
		case api.TerminalStreamOffset:
			at, perr := strconv.ParseInt(string(p[1:]), 10, 64)
			if perr != nil {
				err = fmt.Errorf("terminal: offset %q", p[1:])
			}
			next = at
		case api.TerminalStreamError:
			gotExit = true
			t.exit, t.err = decodeStatus(p[1:])
		}
		if err != nil {
			t.err = err
			break
		}
	}
	t.conn.Close()
}

// deliver hands c to Read, waiting until it takes it or Close (then c is
// dropped: the output is read on to the daemon's close).
func (t *Terminal) deliver(c termChunk) {
	select {
	case t.chunks <- c:
	case <-t.closing:
	}
}

// decodeStatus reads the Kubernetes Status that says how the process
// ended.
func decodeStatus(p []byte) (api.TerminalExit, error) {
	var st struct {
		Status  string `json:"status"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
		Details struct {
			Causes []struct {
				Type    string `json:"reason"`
				Message string `json:"message"`
			} `json:"causes"`
		} `json:"details"`
	}
	if err := json.Unmarshal(p, &st); err != nil {
		return api.TerminalExit{}, wrapf(err, "terminal: decode exit status")
	}
	switch {
	case st.Status == "Success":
		return api.TerminalExit{}, nil
	case st.Reason == api.CodeTerminalTakenOver:
		return api.TerminalExit{}, ErrTerminalTakenOver
	case st.Reason == "NonZeroExitCode":
		for _, c := range st.Details.Causes {
			if c.Type == "ExitCode" {
				n, err := strconv.Atoi(c.Message)
				if err != nil {
					return api.TerminalExit{}, fmt.Errorf("terminal: exit code %q", c.Message)
				}
				return api.TerminalExit{ExitCode: n}, nil
			}
		}
	}
	return api.TerminalExit{}, fmt.Errorf("terminal: %s", strings.TrimSpace(st.Message))
}

// Read reads the process's output; io.EOF once it has ended and all its
// output is read, the error of Wait when the stream ended otherwise.
// Output not read holds the process back.
func (t *Terminal) Read(p []byte) (int, error) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	for len(t.cur) == 0 {
		c, ok := <-t.chunks
		if !ok {
			<-t.done
			if t.err != nil {
				return 0, t.err
			}
			return 0, io.EOF
		}
		t.cur, t.curOut = c.p, c.at >= 0
		if t.curOut {
			t.offset.Store(c.at)
		}
	}
	n := copy(p, t.cur)
	t.cur = t.cur[n:]
	if t.curOut {
		t.offset.Add(int64(n))
	}
	return n, nil
}

// Offset is the offset, in a persistent terminal's output, after the last
// byte Read returned: the since to attach again with and miss nothing
// (of what the terminal still keeps). A one-shot terminal's counts from
// 0, stderr aside.
func (t *Terminal) Offset() int64 { return t.offset.Load() }

// Write sends p as the process's input.
func (t *Terminal) Write(p []byte) (int, error) {
	for n := 0; n < len(p); {
		k := min(len(p)-n, 32<<10)
		if err := t.send(api.TerminalStreamStdin, p[n:n+k]); err != nil {
			return n, err
		}
		n += k
	}
	return len(p), nil
}

// CloseWrite ends the process's input (a tty gets its end-of-file
// character).
func (t *Terminal) CloseWrite() error {
	return t.send(api.TerminalStreamClose, []byte{api.TerminalStreamStdin})
}

// Resize sets the size of the process's tty.
func (t *Terminal) Resize(rows, cols uint16) error {
	b, _ := json.Marshal(struct{ Width, Height uint16 }{cols, rows})
	return t.send(api.TerminalStreamResize, b)
}

func (t *Terminal) send(stream byte, p []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if err := t.conn.WriteMessage(websocket.BinaryMessage, append([]byte{stream}, p...)); err != nil {
		return wrapf(err, "terminal: send")
	}
	return nil
}

// Wait waits until the output is read to its end (or Close) and returns
// how the process ended.
func (t *Terminal) Wait() (api.TerminalExit, error) {
	<-t.done
	return t.exit, t.err
}

// closeWait bounds how long Close waits for the daemon's answer to its
// close.
const closeWait = 3 * time.Second

// Close ends the terminal: a one-shot terminal's process, or the
// attachment to a persistent terminal, which goes on. It waits (within
// closeWait) for the daemon to close in turn, which it does once the
// sandbox has let go of the attachment: a persistent terminal may then
// be attached to as its writer again at once. Calls after the first wait
// for it and return what it did.
func (t *Terminal) Close() error {
	t.once.Do(func() {
		close(t.closing)
		t.wmu.Lock()
		err := t.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		t.wmu.Unlock()
		if err == nil {
			select {
			case <-t.done:
			case <-time.After(closeWait):
			}
		}
		if err := t.conn.Close(); !errors.Is(err, net.ErrClosed) {
			t.closeErr = err // else the end of the output closed it
		}
	})
	return t.closeErr
}

// AttachOptions choose how AttachTerminal attaches.
type AttachOptions struct {
	// Since is the offset in the terminal's output to replay from: 0 for
	// all it keeps (its last MiB), a previous attachment's Offset to go on
	// where it left.
	Since int64
	// ReadOnly attaches as a viewer, without input. Otherwise the
	// attachment is the terminal's one writer: ErrConflict while another
	// writer is attached, unless Takeover, which ends the other's
	// attachment (its Wait: ErrTerminalTakenOver).
	ReadOnly, Takeover bool
}

// CreateTerminal starts a persistent terminal in sandbox id: a process on
// a tty (the login shell unless req.Command) that the sandbox holds
// between attachments, until it exits, DeleteTerminal or the sandbox's
// end. A running terminal of the same name is ErrAlreadyExists.
func (s *SandboxService) CreateTerminal(ctx context.Context, id string, req api.CreateTerminalRequest) (*api.TerminalInfo, error) {
	p, err := sandboxPath(id, "/terminals")
	var info api.TerminalInfo
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodPost, p, req, &info)
	}
	if err != nil {
		return nil, wrapf(err, "create terminal in sandbox %s", id)
	}
	return &info, nil
}

// ListTerminals lists the persistent terminals of sandbox id, running
// and ended, oldest first.
func (s *SandboxService) ListTerminals(ctx context.Context, id string) ([]api.TerminalInfo, error) {
	p, err := sandboxPath(id, "/terminals")
	var list api.TerminalList
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodGet, p, nil, &list)
	}
	if err != nil {
		return nil, wrapf(err, "list terminals of sandbox %s", id)
	}
	return list.Items, nil
}

// GetTerminal describes persistent terminal name of sandbox id
// (ErrNotFound when there is none).
func (s *SandboxService) GetTerminal(ctx context.Context, id, name string) (*api.TerminalInfo, error) {
	return s.terminalOp(ctx, http.MethodGet, id, name, "get")
}

// DeleteTerminal ends persistent terminal name of sandbox id, with all it
// started, and returns how it ended.
func (s *SandboxService) DeleteTerminal(ctx context.Context, id, name string) (*api.TerminalInfo, error) {
	return s.terminalOp(ctx, http.MethodDelete, id, name, "delete")
}

// terminalPath returns the escaped API path of persistent terminal name
// of sandbox id plus suffix.
func terminalPath(id, name, suffix string) (string, error) {
	if name == "" {
		return "", invalidf("terminal name is empty")
	}
	return sandboxPath(id, "/terminals/"+url.PathEscape(name)+suffix)
}

func (s *SandboxService) terminalOp(ctx context.Context, method, id, name, what string) (*api.TerminalInfo, error) {
	p, err := terminalPath(id, name, "")
	var info api.TerminalInfo
	if err == nil {
		err = s.c.doJSON(ctx, method, p, nil, &info)
	}
	if err != nil {
		return nil, wrapf(err, "%s terminal %s of sandbox %s", what, name, id)
	}
	return &info, nil
}

// AttachTerminal attaches to persistent terminal name of sandbox id: Read
// replays its output from opts.Since, then follows it; Offset says where
// Read is, for the next attachment. Close detaches; the terminal goes on.
// ctx bounds the attaching only.
func (s *SandboxService) AttachTerminal(ctx context.Context, id, name string, opts AttachOptions) (*Terminal, error) {
	p, err := terminalPath(id, name, "/attach")
	if err != nil {
		return nil, wrapf(err, "attach terminal")
	}
	q := url.Values{
		"since":    {strconv.FormatInt(opts.Since, 10)},
		"readonly": {strconv.FormatBool(opts.ReadOnly)},
		"takeover": {strconv.FormatBool(opts.Takeover)},
	}
	return s.dialTerminal(ctx, p, q, opts.Since, nil, "attach terminal "+name+" of sandbox "+id)
}
