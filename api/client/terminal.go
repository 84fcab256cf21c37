package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
)

// Terminal is an interactive process in a sandbox, over the daemon's
// WebSocket in Kubernetes' v5.channel.k8s.io protocol: Read is its output
// (stdout, and stderr unless TerminalOptions.Stderr takes it), Write its
// input. The process ends when it exits or the terminal is closed. Read,
// Write, CloseWrite and Resize may be called from different goroutines.
type Terminal struct {
	conn   *websocket.Conn
	out    *io.PipeReader
	stderr io.Writer
	wmu    sync.Mutex
	done   chan struct{}
	// exit and err are final once done is closed.
	exit api.TerminalExit
	err  error
}

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
	u := *s.c.base
	u.Path += apiPrefix + "/sandboxes/" + url.PathEscape(id) + "/exec/interactive"
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
			return nil, readError(resp)
		}
		return nil, fmt.Errorf("connect to a terminal in sandbox %s: %w", id, err)
	}
	if conn.Subprotocol() != api.TerminalProtocolK8s {
		conn.Close()
		return nil, fmt.Errorf("connect to a terminal in sandbox %s: the daemon does not speak %s", id, api.TerminalProtocolK8s)
	}
	conn.SetReadLimit(1 << 20)
	pr, pw := io.Pipe()
	t := &Terminal{conn: conn, out: pr, stderr: opts.Stderr, done: make(chan struct{})}
	if t.stderr == nil {
		t.stderr = pw
	}
	go t.receive(pw)
	return t, nil
}

// receive delivers the output until the exit status and the close.
func (t *Terminal) receive(pw *io.PipeWriter) {
	defer close(t.done)
	gotExit := false
	for {
		_, p, err := t.conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			switch {
			case errors.As(err, &ce) && ce.Code == websocket.CloseNormalClosure && gotExit:
				t.err = nil
			case gotExit:
				t.err = nil // the exit was said; a close not said cleanly loses nothing
			default:
				t.err = fmt.Errorf("terminal: the connection ended before the process: %w", err)
			}
			break
		}
		if len(p) == 0 {
			continue
		}
		switch p[0] {
		case api.TerminalStreamStdout:
			_, err = pw.Write(p[1:])
		case api.TerminalStreamStderr:
			_, err = t.stderr.Write(p[1:])
		case api.TerminalStreamError:
			gotExit = true
			t.exit, t.err = decodeStatus(p[1:])
		}
		if err != nil {
			t.err = fmt.Errorf("terminal: copy output: %w", err)
			break
		}
	}
	pw.CloseWithError(t.err)
	t.conn.Close()
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
		return api.TerminalExit{}, fmt.Errorf("terminal: decode exit status: %w", err)
	}
	switch {
	case st.Status == "Success":
		return api.TerminalExit{}, nil
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
// output is read. Output not read holds the process back.
func (t *Terminal) Read(p []byte) (int, error) { return t.out.Read(p) }

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
		return fmt.Errorf("terminal: send: %w", err)
	}
	return nil
}

// Wait waits until the output is read to its end (or Close) and returns
// how the process ended.
func (t *Terminal) Wait() (api.TerminalExit, error) {
	<-t.done
	return t.exit, t.err
}

// Close ends the terminal and its process.
func (t *Terminal) Close() error {
	t.out.Close()
	t.wmu.Lock()
	t.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	t.wmu.Unlock()
	return t.conn.Close()
}
