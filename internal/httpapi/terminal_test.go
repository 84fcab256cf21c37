package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/testenv"
)

// fastPings has the server ping its terminals every 50 ms for the test.
func fastPings(t *testing.T) {
	p := terminalPingPeriod
	terminalPingPeriod = 50 * time.Millisecond
	t.Cleanup(func() { terminalPingPeriod = p })
}

// dialTerminal opens a terminal of query in a new sandbox of a new env,
// in LiteBoxd's dialect; the connection is closed after the test.
func dialTerminal(t *testing.T, query string) (*env, string, *websocket.Conn) {
	t.Helper()
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/api/v1/sandboxes/" + id + "/exec/interactive?" + query
	conn, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("dial: %v (%d %s)", err, resp.StatusCode, b)
	}
	t.Cleanup(func() { conn.Close() })
	return e, id, conn
}

// The queries LiteBoxd's clients send open a terminal as LiteBoxd's server
// does: its Go SDK sends rows=0&cols=0 for a size its caller did not set
// (the default size, 24 x 80); its CLI's exec -i (stdin, no tty) sends its
// own size with tty=false (ignored: no terminal), and a request without a
// command runs sh.
func TestTerminalLiteBoxdQueries(t *testing.T) {
	for _, tt := range []struct {
		name, query, input string
		want               string
		exit               int
	}{
		{"sdk, no size", "command=stty&command=size&tty=true&rows=0&cols=0", "", "24 80", 0},
		{"cli exec -i", "command=head&command=-n1&tty=false&cols=80&rows=24", "piped\n", "piped", 0},
		{"no command, no tty", "tty=false&rows=0&cols=0", "echo from $0; exit 3\n", "from sh", 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, conn := dialTerminal(t, tt.query)
			if tt.input != "" {
				if err := conn.WriteJSON(map[string]string{"type": "input", "data": tt.input}); err != nil {
					t.Fatal(err)
				}
			}
			var out strings.Builder
			for {
				var msg struct {
					Type     string `json:"type"`
					Data     string `json:"data"`
					ExitCode *int   `json:"exitCode"`
				}
				if err := conn.ReadJSON(&msg); err != nil {
					t.Fatalf("read: %v (output so far %q)", err, out.String())
				}
				if msg.Type == "output" {
					out.WriteString(msg.Data)
					continue
				}
				if msg.Type != "exit" || msg.ExitCode == nil || *msg.ExitCode != tt.exit {
					t.Fatalf("frame %+v, want an exit %d (output %q)", msg, tt.exit, out.String())
				}
				break
			}
			if got := strings.TrimSpace(out.String()); got != tt.want {
				t.Errorf("output %q, want %q", got, tt.want)
			}
		})
	}
}

// The server pings an idle terminal, and a client that answers keeps it.
func TestTerminalPing(t *testing.T) {
	fastPings(t)
	_, _, conn := dialTerminal(t, "command=sleep&command=1&tty=false")
	pings := 0
	conn.SetPingHandler(func(data string) error {
		pings++
		return conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	var exit struct {
		Type     string `json:"type"`
		ExitCode *int   `json:"exitCode"`
	}
	if err := conn.ReadJSON(&exit); err != nil || exit.Type != "exit" || exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("after a second of sleep: %+v, %v", exit, err)
	}
	if pings < 5 {
		t.Errorf("%d pings in a second at a period of 50 ms", pings)
	}
	if _, _, err := conn.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after the exit: %v, want a close 1000", err)
	}
}

// A bad message from the client ends the session with exactly one error,
// a 400 (BadRequest in Kubernetes' dialect) saying what is wrong in the
// protocol's names, then a normal close: never a second error about the
// stream the refusal cut, nor a path of the host or a name of Go's.
func TestTerminalBadFrame(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/api/v1/sandboxes/" + id + "/exec/interactive?command=sleep&command=5&tty=false"
	tests := []struct {
		name string
		k8s  bool
		typ  int
		msg  string
		want string // the error's message
	}{
		{"json: size out of range", false, websocket.TextMessage, `{"type":"resize","cols":70000,"rows":30}`,
			"a message is not a terminal frame: cols must be an integer from 0 to 65535 (got number 70000)"},
		{"json: size not a number", false, websocket.TextMessage, `{"type":"resize","cols":"a","rows":30}`,
			"a message is not a terminal frame: cols must be an integer from 0 to 65535 (got string)"},
		{"json: data not a string", false, websocket.TextMessage, `{"type":"input","data":1}`,
			"a message is not a terminal frame: data must be a string (got number)"},
		{"json: not an object", false, websocket.TextMessage, `["resize"]`,
			"a message is not a terminal frame: a frame must be a JSON object (got array)"},
		{"json: not JSON", false, websocket.TextMessage, `garbage`,
			`a message is not a terminal frame: line 1, column 1: unexpected "g" where a value should start`},
		{"k8s: size out of range", true, websocket.BinaryMessage, "\x04{\"Width\":70000,\"Height\":1}",
			"resize: Width must be an integer from 0 to 65535 (got number 70000)"},
		{"k8s: size not a number", true, websocket.BinaryMessage, "\x04{\"Width\":80,\"Height\":\"x\"}",
			"resize: Height must be an integer from 0 to 65535 (got string)"},
		{"k8s: unknown stream", true, websocket.BinaryMessage, "\x09x", "stream 9 takes no input"},
		{"k8s: text message", true, websocket.TextMessage, "hi", "v5.channel.k8s.io takes binary messages that start with their stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := *websocket.DefaultDialer
			if tt.k8s {
				d.Subprotocols = []string{api.TerminalProtocolK8s}
			}
			conn, _, err := d.Dial(u, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.WriteMessage(tt.typ, []byte(tt.msg)); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			var errs []string
			for {
				_, p, err := conn.ReadMessage()
				if err != nil {
					if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
						t.Errorf("the session ended with %v, want a close 1000", err)
					}
					break
				}
				if tt.k8s && len(p) > 0 && p[0] == api.TerminalStreamError {
					errs = append(errs, string(p[1:]))
				} else if !tt.k8s {
					errs = append(errs, string(p))
				}
			}
			if len(errs) != 1 {
				t.Fatalf("%d error messages, want 1: %q", len(errs), errs)
			}
			if strings.Contains(errs[0], e.url) || strings.Contains(errs[0], "/tmp/") || strings.Contains(errs[0], ".sock") {
				t.Errorf("the error names a path of the host: %s", errs[0])
			}
			if tt.k8s {
				var st struct {
					Status, Reason, Message string
					Code                    int
				}
				if err := json.Unmarshal([]byte(errs[0]), &st); err != nil || st.Status != "Failure" || st.Reason != "BadRequest" || st.Code != 400 ||
					st.Message != tt.want {
					t.Errorf("status %s (%v), want a Failure of reason BadRequest, code 400, message %q", errs[0], err, tt.want)
				}
				return
			}
			var f jsonFrame
			if err := json.Unmarshal([]byte(errs[0]), &f); err != nil || f.Type != "error" || f.Code != api.CodeInvalidRequest || f.Message != tt.want {
				t.Errorf("frame %s (%v), want an error of code %s, message %q", errs[0], err, api.CodeInvalidRequest, tt.want)
			}
		})
	}
}

// A session's end is told to the client as it is, but a failed stream
// from the agent, whose error names the agent's socket on the host.
func TestTerminalFailure(t *testing.T) {
	lost := fmt.Errorf("attachment stream ended before the result: %w: read unix @->/data/oci/x/agent.sock: use of closed network connection", errdefs.ErrUnavailable)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"agent stream lost", lost, "the connection to the sandbox's agent ended before the process did"},
		{"sandbox deleted", fmt.Errorf("attachment stream ended before the result: %w",
			errdefs.WithCode(errdefs.Unavailable("sandbox sb-1 was deleted"), api.CodeSandboxNotFound)),
			"attachment stream ended before the result: sandbox sb-1 was deleted"},
		{"refused input", errdefs.Invalid("stream 9 takes no input"), "stream 9 takes no input"},
		{"taken over", errdefs.Precondition("another client took over this terminal"), "another client took over this terminal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := terminalFailure(tt.err)
			if got.Error() != tt.want || errdefs.Code(got) != errdefs.Code(tt.err) {
				t.Errorf("told %q (%s), want %q (%s)", got, errdefs.Code(got), tt.want, errdefs.Code(tt.err))
			}
		})
	}
}

// A client that floods the input of a process that reads none, then
// vanishes without a close, still ends the process: the server's input
// is stuck sending to the agent, so only its keepalive sees the client
// gone.
func TestTerminalInputFloodClientGone(t *testing.T) {
	fastPings(t)
	e, id, conn := dialTerminal(t, "command=sleep&command=60&tty=false")
	// Enough input to fill the pipe and every buffer on the way; the
	// writes are bounded in time, as the server may stop reading.
	msg, _ := json.Marshal(jsonFrame{Type: "input", Data: strings.Repeat("x", 1<<20-64)})
	conn.SetWriteDeadline(time.Now().Add(3 * time.Second))
	for range 8 {
		if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
			break
		}
	}
	conn.UnderlyingConn().Close() // gone, without a close frame
	waitNoProcs(t, e, id)
}

// waitNoProcs waits until sandbox id runs no process of the agent's, and
// fails the test if one still runs 15 s on.
func waitNoProcs(t *testing.T, e *env, id string) {
	t.Helper()
	ctx := context.Background()
	ac, err := e.m.Agent(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		procs, err := ac.Procs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, p := range procs {
			if p.Running {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes still run 15 s after their client went away: %+v", running, procs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A client that closes its terminal ends the process, and the stream
// that cuts is not logged as a failure of the sandbox's agent: clients
// leave terminals all the time.
func TestTerminalClientCloseQuiet(t *testing.T) {
	var logs testenv.Buffer
	e := newEnv(t, envOptions{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/api/v1/sandboxes/" + id + "/exec/interactive?command=sleep&command=60&tty=false"
	for _, how := range []string{"close frame", "connection dropped"} {
		conn, _, err := websocket.DefaultDialer.Dial(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if how == "close frame" {
			conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		}
		conn.Close()
		waitNoProcs(t, e, id)
	}
	// The server's side ends once its input sees the close.
	time.Sleep(100 * time.Millisecond)
	if s := logs.String(); s != "" {
		t.Errorf("a client's close was logged:\n%s", s)
	}
}
