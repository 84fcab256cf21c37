package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent2env/agent2env/api/client"
)

// What a client of the stdio bridge writes, one message a line.
const (
	pipeInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
		`"capabilities":{},"clientInfo":{"name":"pipe","version":"0"}}}`
	pipeInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// pipeCall is a tools/call of id, with a progress token when token is
// not empty.
func pipeCall(id int, name, args, token string) string {
	meta := ""
	if token != "" {
		meta = fmt.Sprintf(`,"_meta":{"progressToken":%q}`, token)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, id, name, args, meta)
}

// pipeCancel cancels the call of id.
func pipeCancel(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"test"}}`, id)
}

// waitArgs are the arguments of the test tool wait.
type waitArgs struct {
	MS int `json:"ms"`
}

// waitResult is its result.
type waitResult struct {
	Waited int `json:"waited"`
}

// pipeClient is a client of the bridge writing lines to its stdin and
// reading what it writes to stdout.
type pipeClient struct {
	in  *io.PipeWriter
	out <-chan map[string]any // the messages written, until the bridge is done
	got []map[string]any      // the messages read so far
	// started has a value for each call of the daemon's hang tool that
	// started.
	started <-chan struct{}
}

// pipeStep is a step of a client's script.
type pipeStep func(t *testing.T, p *pipeClient)

// send writes lines to the bridge's stdin, at once.
func send(lines ...string) pipeStep {
	return func(t *testing.T, p *pipeClient) {
		t.Helper()
		if _, err := io.WriteString(p.in, strings.Join(lines, "\n")+"\n"); err != nil {
			t.Fatalf("write %s: %v", lines, err)
		}
	}
}

// await reads the bridge's output until it has answered id.
func await(id int) pipeStep {
	return func(t *testing.T, p *pipeClient) {
		t.Helper()
		for answer(p.got, id) == nil {
			select {
			case m, ok := <-p.out:
				if !ok {
					t.Fatalf("the bridge ended without answering %d", id)
				}
				p.got = append(p.got, m)
			case <-time.After(20 * time.Second):
				t.Fatalf("no answer to %d", id)
			}
		}
	}
}

// hangStarted waits for a call of the hang tool to reach the daemon.
func hangStarted(t *testing.T, p *pipeClient) {
	t.Helper()
	select {
	case <-p.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the hang call did not reach the daemon")
	}
}

// answer returns the response to id among msgs, or nil.
func answer(msgs []map[string]any, id int) map[string]any {
	for _, m := range msgs {
		if _, ok := m["method"]; !ok && m["id"] == float64(id) {
			return m
		}
	}
	return nil
}

// TestBridgeDrain: a client of `agent2env mcp` that closes stdin once it
// has written its requests (a one-shot pipe) gets every answer, with the
// pending calls' progress, before the bridge returns; with nothing
// pending, the bridge returns at once; a call that outlasts DrainTimeout
// is cancelled then, at the daemon too; a cancellation, or the end of the
// bridge's context (SIGTERM), ends the wait.
func TestBridgeDrain(t *testing.T) {
	const long = 30 * time.Second // a DrainTimeout the rows must not wait for
	for _, tt := range []struct {
		name   string
		script []pipeStep
		bound  time.Duration
		// interrupt cancels the bridge's context 200 ms after stdin closes,
		// or at once when stdinOpen leaves it open.
		interrupt, stdinOpen bool
		// The bridge returns between atLeast and within after stdin closes
		// (or, left open, after the interrupt).
		atLeast, within time.Duration
		// answered are the ids answered with a result, unanswered those
		// answered with nothing.
		answered, unanswered []int
		// progress is the id of the call whose answer a progress
		// notification of token "tok" comes before, if any.
		progress int
		// cancelled: a call of the hang tool ends cancelled at the daemon.
		cancelled bool
	}{
		{name: "pending answers", script: []pipeStep{send(pipeInitialize, pipeInitialized,
			pipeCall(2, "wait", `{"ms":300}`, "tok"), pipeCall(3, "wait", `{"ms":50}`, ""),
			`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)},
			bound: long, within: 10 * time.Second, answered: []int{1, 2, 3, 4}, progress: 2},
		{name: "initialize alone", script: []pipeStep{send(pipeInitialize)},
			bound: long, within: 10 * time.Second, answered: []int{1}},
		{name: "nothing pending", script: []pipeStep{send(pipeInitialize), await(1), send(pipeInitialized)},
			bound: long, within: 5 * time.Second, answered: []int{1}},
		{name: "no input", bound: long, within: 5 * time.Second},
		{name: "a call outlasting the bound", script: []pipeStep{send(pipeInitialize, pipeInitialized,
			pipeCall(2, "hang", `{}`, ""), pipeCall(3, "wait", `{"ms":50}`, ""))},
			bound: 500 * time.Millisecond, atLeast: 500 * time.Millisecond, within: 10 * time.Second,
			answered: []int{1, 3}, unanswered: []int{2}, cancelled: true},
		{name: "a call cancelled", script: []pipeStep{send(pipeInitialize), await(1),
			send(pipeInitialized, pipeCall(2, "hang", `{}`, "")), hangStarted, send(pipeCancel(2))},
			bound: long, within: 5 * time.Second, answered: []int{1}, cancelled: true},
		{name: "interrupted", script: []pipeStep{send(pipeInitialize, pipeInitialized, pipeCall(2, "hang", `{}`, "")), hangStarted},
			interrupt: true, bound: long, within: 5 * time.Second, answered: []int{1}, unanswered: []int{2}, cancelled: true},
		{name: "interrupted, stdin open", script: []pipeStep{send(pipeInitialize, pipeInitialized, pipeCall(2, "hang", `{}`, "")), hangStarted},
			interrupt: true, stdinOpen: true, bound: long, within: 5 * time.Second, answered: []int{1}, unanswered: []int{2}, cancelled: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, false)
			started, ended := make(chan struct{}, 4), make(chan error, 4)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the daemon's server closes
			add(e.srv, tool[waitArgs, waitResult]{name: "wait", title: "Wait",
				handle: func(ctx context.Context, c *call, in waitArgs) (waitResult, []mcp.Content, error) {
					if p := c.sink(ctx); p != nil {
						p.notify("waiting\n")
					}
					select {
					case <-time.After(time.Duration(in.MS) * time.Millisecond):
						return waitResult{Waited: in.MS}, nil, nil
					case <-ctx.Done():
						return waitResult{}, nil, ctx.Err()
					}
				}})
			add(e.srv, tool[NoArgs, NoArgs]{name: "hang", title: "Hang",
				handle: func(ctx context.Context, c *call, _ NoArgs) (NoArgs, []mcp.Content, error) {
					started <- struct{}{}
					select {
					case <-ctx.Done():
						ended <- ctx.Err()
						return NoArgs{}, nil, ctx.Err()
					case <-release:
						return NoArgs{}, nil, errors.New("released")
					}
				}})
			c, err := client.New(e.url)
			if err != nil {
				t.Fatal(err)
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			out := make(chan map[string]any, 100)
			go func() {
				defer close(out)
				sc := bufio.NewScanner(outR)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					var m map[string]any
					if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
						t.Errorf("the bridge wrote %q: %v", sc.Text(), err)
						continue
					}
					out <- m
				}
			}()
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			bridged := make(chan error, 1)
			go func() {
				bridged <- Bridge(ctx, c, &mcp.IOTransport{Reader: inR, Writer: outW},
					BridgeOptions{DrainTimeout: tt.bound, Log: slog.New(slog.DiscardHandler)})
			}()
			p := &pipeClient{in: inW, out: out, started: started}
			for _, step := range tt.script {
				step(t, p)
			}
			if !tt.stdinOpen {
				inW.Close()
			}
			closed := time.Now()
			if tt.interrupt {
				if !tt.stdinOpen {
					time.Sleep(200 * time.Millisecond)
				}
				cancel()
			}
			var elapsed time.Duration
			select {
			case err := <-bridged:
				elapsed = time.Since(closed)
				if tt.interrupt && !errors.Is(err, context.Canceled) || !tt.interrupt && err != nil {
					t.Errorf("bridge: %v", err)
				}
			case <-time.After(tt.within + 10*time.Second):
				t.Fatalf("the bridge did not return within %v", tt.within+10*time.Second)
			}
			inW.Close()
			outW.Close()
			for m := range out {
				p.got = append(p.got, m)
			}
			var lines []string
			for _, m := range p.got {
				b, _ := json.Marshal(m)
				lines = append(lines, string(b))
			}
			written := strings.Join(lines, "\n")
			if elapsed < tt.atLeast || elapsed > tt.within {
				t.Errorf("the bridge returned %v after stdin closed, want between %v and %v; it wrote:\n%s", elapsed, tt.atLeast, tt.within, written)
			}
			for _, id := range tt.answered {
				a := answer(p.got, id)
				res, _ := a["result"].(map[string]any)
				if res == nil || res["isError"] == true {
					t.Errorf("answer to %d: %v, want a result; the bridge wrote:\n%s", id, a, written)
				}
			}
			for _, id := range tt.unanswered {
				if a := answer(p.got, id); a != nil {
					t.Errorf("answer to %d: %v, want none", id, a)
				}
			}
			if tt.progress != 0 {
				seen := false
				for _, m := range p.got {
					if m["method"] == "notifications/progress" && m["params"].(map[string]any)["progressToken"] == "tok" {
						seen = true
					}
					if answer([]map[string]any{m}, tt.progress) != nil {
						break
					}
				}
				if !seen {
					t.Errorf("no progress before the answer to %d; the bridge wrote:\n%s", tt.progress, written)
				}
			}
			if tt.cancelled {
				select {
				case err := <-ended:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("the daemon's hang call ended with %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Error("the daemon's hang call was not cancelled")
				}
			}
		})
	}
}

// TestDrainTimeout: the default DrainTimeout is the longer of the
// default call timeout and the daemon's, plus drainGrace, and does not
// overflow.
func TestDrainTimeout(t *testing.T) {
	for _, tt := range []struct {
		callTimeout float64
		want        time.Duration
	}{
		{0, 60 * time.Second},
		{10, 60 * time.Second},
		{100, 130 * time.Second},
		{0.5e10, 5e9*time.Second + drainGrace},
		{math.MaxInt64, math.MaxInt64},
		{math.Inf(1), math.MaxInt64},
	} {
		if got := drainTimeout(tt.callTimeout); got != tt.want {
			t.Errorf("drainTimeout(%v) = %v, want %v", tt.callTimeout, got, tt.want)
		}
	}
}

// TestBridgeBadLines: lines of a stdio client that are no JSON-RPC
// message are answered with the JSON-RPC error for each, and the session
// goes on: the requests after them are answered.
func TestBridgeBadLines(t *testing.T) {
	e := newEnv(t, false)
	c, err := client.New(e.url)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	bridged := make(chan error, 1)
	go func() {
		bridged <- Bridge(bg, c, lineTransport(inR, outW, 1<<10, slog.New(slog.DiscardHandler)),
			BridgeOptions{DrainTimeout: 10 * time.Second, Log: slog.New(slog.DiscardHandler)})
	}()
	bad := []struct {
		line string
		id   any // answered with
		code float64
	}{
		{"garbage{", nil, -32700},
		{`{"jsonrpc":"2.0","id":1} {"jsonrpc":"2.0"}`, nil, -32700},
		{`"a string"`, nil, -32600},
		{`{"jsonrpc":"2.0","id":7,"method":5}`, float64(7), -32600},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/list"}`, nil, -32600},
		{`[]`, nil, -32600},
		{`[1, 2]`, nil, -32600},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 2<<10) + `"}}`, nil, -32600},
	}
	lines := []string{pipeInitialize, pipeInitialized}
	for _, b := range bad {
		lines = append(lines, b.line, "")
	}
	lines = append(lines, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	go func() {
		io.WriteString(inW, strings.Join(lines, "\n")+"\n")
		inW.Close()
	}()
	var got []map[string]any
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	for answer(got, 9) == nil && sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("the bridge wrote %q: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	if answer(got, 9) == nil {
		t.Fatalf("no answer to the request after the bad lines; the bridge wrote %v", got)
	}
	var errs []map[string]any
	for _, m := range got {
		if e, ok := m["error"].(map[string]any); ok {
			errs = append(errs, map[string]any{"id": m["id"], "code": e["code"]})
		}
	}
	if len(errs) != len(bad) {
		t.Fatalf("errors %v, want one for each of %d bad lines", errs, len(bad))
	}
	for i, b := range bad {
		if errs[i]["id"] != b.id || errs[i]["code"] != b.code {
			t.Errorf("line %q answered %v, want id %v code %v", b.line, errs[i], b.id, b.code)
		}
	}
	go io.Copy(io.Discard, outR)
	select {
	case err := <-bridged:
		if err != nil {
			t.Errorf("bridge: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the bridge did not return after stdin closed")
	}
}

// A bridge the daemon refuses for its token fails as
// client.ErrUnauthenticated, for which the CLI says how to give one (the
// MCP SDK's error says "Unauthorized" only); another refusal does not.
func TestBridgeUnauthorized(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   bool
	}{{http.StatusUnauthorized, true}, {http.StatusForbidden, false}} {
		daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			io.WriteString(w, `{"error":"invalid or expired API key","code":"UNAUTHORIZED"}`)
		}))
		c, err := client.New(daemon.URL, client.WithToken("wrong-token-0123456789"))
		if err != nil {
			t.Fatal(err)
		}
		serverT, _ := mcp.NewInMemoryTransports()
		err = Bridge(bg, c, serverT, BridgeOptions{Log: slog.New(slog.DiscardHandler)})
		daemon.Close()
		if err == nil || errors.Is(err, client.ErrUnauthenticated) != tc.want {
			t.Errorf("status %d: bridge ended with %v; want unauthenticated %v", tc.status, err, tc.want)
		}
	}
}
