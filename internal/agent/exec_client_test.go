package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/testenv"
)

// TestExecSuspend: an exec in flight is suspended for a checkpoint, as an
// attachment is: it lets go of its connection, the command runs on, and
// once the dial is let through the exec goes on from where its output
// stopped: its caller gets all of it, once, in order (more than the
// agent's ring included: the output waits for it), the input it sent
// meanwhile, and the command's exit code. Its output is exact across two
// suspensions too.
func TestExecSuspend(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req       ExecRequest
		suspends  int
		before    string // output seen before the suspension
		input     []string
		wantOut   string
		wantBytes int // of output, when wantOut is not given
		wantCode  int
	}{
		{name: "output", req: ExecRequest{Shell: "for i in $(seq 1 30); do echo $i; sleep 0.02; done; exit 3"}, suspends: 1,
			before: "3\n", wantOut: seq(30), wantCode: 3},
		{name: "twice", req: ExecRequest{Shell: "for i in $(seq 1 30); do echo $i; sleep 0.02; done"}, suspends: 2,
			before: "3\n", wantOut: seq(30)},
		{name: "input", req: ExecRequest{Command: []string{"cat"}, Stdin: true}, suspends: 1,
			input: []string{"before\n", "during\n", "after\n"}, before: "before\n", wantOut: "before\nduring\nafter\n"},
		{name: "more than the ring", req: ExecRequest{Shell: "echo start; sleep 0.2; head -c 1000000 /dev/zero"}, suspends: 1,
			before: "start\n", wantBytes: len("start\n") + 1000000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, hold := gatedAgent(t, time.Minute)
			var out testenv.Buffer
			var stdin io.Reader
			var feed *io.PipeWriter
			if tc.req.Stdin {
				stdin, feed = io.Pipe()
				defer feed.Close()
			}
			type result struct {
				res ExecResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := c.Exec(context.Background(), tc.req, stdin, &out, nil)
				done <- result{res, err}
			}()
			if len(tc.input) > 0 {
				if _, err := io.WriteString(feed, tc.input[0]); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "the output before the suspension", func() bool { return strings.Contains(out.String(), tc.before) })
			for i := range tc.suspends {
				if i > 0 {
					// Attached again: a suspension before would find none.
					seen := len(out.String())
					waitFor(t, "the output after the suspension", func() bool { return len(out.String()) > seen })
				}
				release := hold()
				n, resume := c.SuspendAttachments()
				if n != 1 {
					t.Errorf("SuspendAttachments = %d, want 1", n)
				}
				wrote := make(chan error, 1)
				if len(tc.input) > 1 {
					go func() { _, err := io.WriteString(feed, tc.input[1]); wrote <- err }()
				}
				time.Sleep(300 * time.Millisecond)
				resume()
				release()
				if len(tc.input) > 1 {
					if err := <-wrote; err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			for _, in := range tc.input[min(2, len(tc.input)):] {
				if _, err := io.WriteString(feed, in); err != nil {
					t.Fatal(err)
				}
			}
			if feed != nil {
				feed.Close()
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the exec did not end after the suspension")
			}
			if r.err != nil || r.res.ExitCode != tc.wantCode {
				t.Fatalf("exec = %+v, %v; want exit %d", r.res, r.err, tc.wantCode)
			}
			switch got := out.String(); {
			case tc.wantOut != "" && got != tc.wantOut:
				t.Errorf("output %q, want %q", got, tc.wantOut)
			case tc.wantBytes != 0 && len(got) != tc.wantBytes:
				t.Errorf("%d bytes of output, want %d", len(got), tc.wantBytes)
			}
		})
	}
}

// seq is the output of seq 1 n.
func seq(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// TestExecSuspendedClientGone: an exec whose caller leaves while a
// checkpoint has it suspended kills its command once the checkpoint is
// done, as one whose caller leaves does; before, it runs on.
func TestExecSuspendedClientGone(t *testing.T) {
	c, _, hold := gatedAgent(t, time.Minute)
	dir := t.TempDir()
	marker := filepath.Join(dir, "survived")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, ExecRequest{Shell: "echo started; sleep 1; touch " + marker}, nil, io.Discard, nil)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	release := hold()
	_, resume := c.SuspendAttachments()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("exec = %v, want canceled", err)
	}
	resume()
	release()
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command of an exec whose caller left while suspended survived")
	}
}

// TestExecOlderAgent: an agent older than POST /v1/exec/attach, which
// refuses it before it reads the command, runs the command on POST
// /v1/exec, as it did.
func TestExecOlderAgent(t *testing.T) {
	var attaches, execs atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/exec/", func(w http.ResponseWriter, r *http.Request) {
		attaches.Add(1)
		http.NotFound(w, r)
	})
	mux.HandleFunc("POST /v1/exec", func(w http.ResponseWriter, r *http.Request) {
		execs.Add(1)
		var req ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err)
			return
		}
		_ = writeFrame(w, frameStdout, []byte(strings.Join(req.Command, " ")+"\n"))
		b, _ := json.Marshal(ExecResult{ExitCode: 7})
		_ = writeFrame(w, frameResult, b)
	})
	c := serveOlderAgent(t, mux)
	for range 2 {
		var out bytes.Buffer
		res, err := c.Exec(context.Background(), ExecRequest{Command: []string{"echo", "old"}}, nil, &out, nil)
		if err != nil || res.ExitCode != 7 || out.String() != "echo old\n" {
			t.Errorf("exec on an older agent = %+v, %v, output %q; want exit 7, the old answer", res, err, out.String())
		}
	}
	if attaches.Load() != 2 || execs.Load() != 2 {
		t.Errorf("%d requests to /v1/exec/attach, %d to /v1/exec; want 2 and 2", attaches.Load(), execs.Load())
	}
}

// serveOlderAgent serves mux, an older agent's routes, and returns a
// client of it.
func serveOlderAgent(t *testing.T, mux *http.ServeMux) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "old.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c := NewClient(UnixDialer(sock), "")
	t.Cleanup(c.Close)
	return c
}

// TestExecWaitsForCheckpoint: an exec that starts while a checkpoint holds
// the attachments waits until it lets them go on, though a connection of
// the pool could carry it (the checkpoint's dialer holds only new ones):
// it would otherwise hold that connection through the checkpoint, never
// suspended. It then runs as usual; one whose caller leaves meanwhile
// fails with its context's error and runs nothing.
func TestExecWaitsForCheckpoint(t *testing.T) {
	c, _, hold := gatedAgent(t, time.Minute)
	ctx := context.Background()
	for range 2 { // the first, which asks whether the agent takes execs, may leave none in the pool
		if _, err := c.Exec(ctx, ExecRequest{Shell: "true"}, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // its connection back in the pool
	release := hold()
	defer release()
	_, resume := c.SuspendAttachments()
	var out testenv.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, ExecRequest{Shell: "echo ran"}, nil, &out, nil)
		done <- err
	}()
	gone, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	marker := filepath.Join(t.TempDir(), "ran")
	go func() {
		_, err := c.Exec(gone, ExecRequest{Shell: "touch " + marker}, nil, nil, nil)
		left <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("an exec started during the checkpoint ran: %v, output %q", err, out.String())
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("exec whose caller left during the checkpoint = %v, want canceled", err)
	}
	resume()
	release()
	select {
	case err := <-done:
		if err != nil || out.String() != "ran\n" {
			t.Errorf("exec after the checkpoint = %v, output %q; want ran", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exec did not run after the checkpoint")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command of an exec whose caller left during the checkpoint ran")
	}
}
