package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/testenv"
)

// procOutput is what following a process to its end read.
type procOutput struct {
	res            ProcOutputResult
	stdout, stderr string
}

// follow reads id's output from since to its end.
func follow(t *testing.T, c *Client, id string, since int64) procOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	res, err := c.ProcOutput(ctx, id, ProcOutputOptions{Since: since, Follow: true}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("follow the output of %s: %v", id, err)
	}
	if res.Proc.Running {
		t.Fatalf("the output of %s ended while it runs: %+v", id, res.Proc)
	}
	return procOutput{res, stdout.String(), stderr.String()}
}

// startProc starts req and fails the test if it cannot.
func startProc(t *testing.T, c *Client, req ProcRequest) ProcInfo {
	t.Helper()
	info, err := c.StartProc(context.Background(), req)
	if err != nil {
		t.Fatalf("start %+v: %v", req, err)
	}
	if info.ID == "" || info.Pid == 0 || info.Started.IsZero() {
		t.Fatalf("start %+v = %+v", req, info)
	}
	return info
}

// waitFor polls cond until it holds, and fails the test after a while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProcRequestValidate(t *testing.T) {
	tests := []struct {
		req  ProcRequest
		want string // in the error; "" for valid
	}{
		{ProcRequest{Command: []string{"true"}}, ""},
		{ProcRequest{TTY: true}, ""},
		{ProcRequest{Shell: "x", TTY: true, Rows: 10, Cols: 20, Tag: "term-1.a_b"}, ""},
		{ProcRequest{}, "command is empty"},
		{ProcRequest{Command: []string{"a"}, Shell: "b"}, "exclusive"},
		{ProcRequest{Command: []string{""}}, "command[0] is empty"},
		{ProcRequest{Shell: "x", Tag: "proc-1"}, "tag"},
		{ProcRequest{Shell: "x", Tag: "has space"}, "tag"},
		{ProcRequest{Shell: "x", Tag: strings.Repeat("a", 65)}, "tag"},
		{ProcRequest{Shell: "x", Rows: 10}, "need tty"},
		{ProcRequest{Shell: "x", TTY: true, Stdin: true}, "stdin"},
		{ProcRequest{Shell: "x", OutputLimit: 10}, "output_limit"},
		{ProcRequest{Shell: "x", Timeout: -1}, "timeout"},
		{ProcRequest{Shell: "x", OutputLimit: MaxProcOutput + 1}, "output_limit"},
	}
	for _, tt := range tests {
		err := tt.req.Validate()
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("validate %+v = %v, want %q", tt.req, err, tt.want)
		}
	}
}

func TestProcStartListKill(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	tag := newTag(t)
	a := startProc(t, c, ProcRequest{Command: []string{"sleep", tag}, Tag: "sleeper"})
	b := startProc(t, c, ProcRequest{Shell: "exit 0"})
	if _, err := c.StartProc(ctx, ProcRequest{Shell: "true", Tag: "sleeper"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second process tagged sleeper: %v, want already exists", err)
	}
	if _, err := c.StartProc(ctx, ProcRequest{Command: []string{"no-such-command-a2e"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("start a missing command: %v, want invalid argument", err)
	}
	follow(t, c, b.ID, 0)
	list, err := c.Procs(ctx)
	if err != nil || len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID || !list[0].Running || list[1].Running {
		t.Fatalf("list = %+v, %v; want %s running and %s ended", list, err, a.ID, b.ID)
	}
	if got := strings.Join(list[0].Command, " "); got != "sleep "+tag {
		t.Errorf("command = %q", got)
	}
	byTag, err := c.Proc(ctx, "sleeper")
	if err != nil || byTag.ID != a.ID || byTag.Pid != a.Pid {
		t.Errorf("proc by tag = %+v, %v; want %s", byTag, err, a.ID)
	}
	end, err := c.KillProc(ctx, "sleeper")
	if err != nil || end.Running || end.Signal != "SIGTERM" || end.ExitCode != 128+15 {
		t.Errorf("kill = %+v, %v; want ended by SIGTERM", end, err)
	}
	waitGone(t, tag, "after DELETE")
	for _, id := range []string{a.ID, "sleeper"} {
		if _, err := c.Proc(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("proc %s after DELETE: %v, want not found", id, err)
		}
	}
	if err := c.ProcSignal(ctx, b.ID, "TERM"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("signal an ended process: %v, want failed precondition", err)
	}
	// The tag is free again.
	startProc(t, c, ProcRequest{Shell: "true", Tag: "sleeper"})
}

// How a process ends is its status, with or without a tty.
func TestProcExit(t *testing.T) {
	c, _ := startAgent(t)
	tests := []struct {
		shell  string
		code   int
		signal string
	}{
		{"exit 0", 0, ""},
		{"exit 3", 3, ""},
		{"kill -TERM $$", 128 + 15, "SIGTERM"},
		{"kill -KILL $$", 128 + 9, "SIGKILL"},
	}
	for _, tt := range tests {
		for _, tty := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s tty=%v", tt.shell, tty), func(t *testing.T) {
				info := startProc(t, c, ProcRequest{Shell: tt.shell, TTY: tty})
				out := follow(t, c, info.ID, 0)
				if p := out.res.Proc; p.ExitCode != tt.code || p.Signal != tt.signal || p.Ended.IsZero() {
					t.Errorf("ended %+v, want code %d signal %q", p, tt.code, tt.signal)
				}
			})
		}
	}
}

// A timeout ends the process and all it started; the process stays
// listed with how it ended.
func TestProcTimeout(t *testing.T) {
	c, _ := startAgent(t)
	tag := newTag(t)
	start := time.Now()
	info := startProc(t, c, ProcRequest{Shell: "setsid sleep " + tag + " & sleep " + tag, Timeout: 200 * time.Millisecond})
	out := follow(t, c, info.ID, 0)
	if p := out.res.Proc; !p.TimedOut || p.Signal != "SIGTERM" || time.Since(start) > 5*time.Second {
		t.Errorf("ended %+v after %v, want timed out by SIGTERM", p, time.Since(start))
	}
	waitGone(t, tag, "after the timeout")
	quick := startProc(t, c, ProcRequest{Shell: "exit 0", Timeout: time.Minute})
	if p := follow(t, c, quick.ID, 0).res.Proc; p.TimedOut || p.ExitCode != 0 {
		t.Errorf("a process within its timeout ended %+v", p)
	}
}

// A tty has its size before the command starts, and a resize changes it;
// its environment has TERM.
func TestProcTTY(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	info := startProc(t, c, ProcRequest{Shell: `stty size; echo "$TERM"; [ -t 0 ] && echo tty; read x; stty size`, TTY: true, Rows: 33, Cols: 111})
	waitFor(t, "the first size", func() bool {
		var out bytes.Buffer
		_, _ = c.ProcOutput(ctx, info.ID, ProcOutputOptions{}, &out, nil)
		return strings.Contains(out.String(), "tty")
	})
	if err := c.ProcResize(ctx, info.ID, 44, 122); err != nil {
		t.Fatal(err)
	}
	if err := c.ProcStdin(ctx, info.ID, strings.NewReader("\n"), false); err != nil {
		t.Fatal(err)
	}
	out := follow(t, c, info.ID, 0)
	if want := "33 111\r\nxterm-256color\r\ntty\r\n\r\n44 122\r\n"; out.stdout != want || out.stderr != "" {
		t.Errorf("output %q, stderr %q; want %q", out.stdout, out.stderr, want)
	}
	if p := out.res.Proc; p.Rows != 44 || p.Cols != 122 || !p.TTY {
		t.Errorf("info = %+v, want a 44 x 122 tty", p)
	}
	pipes := startProc(t, c, ProcRequest{Command: []string{"sleep", "10"}})
	if err := c.ProcResize(ctx, pipes.ID, 1, 1); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("resize without tty: %v, want invalid argument", err)
	}
}

// A tty without a command runs the login shell.
func TestProcLoginShell(t *testing.T) {
	c, _ := startAgent(t)
	info := startProc(t, c, ProcRequest{TTY: true})
	if want := loginShell(os.Getuid()); len(info.Command) != 1 || info.Command[0] != want {
		t.Errorf("command = %q, want [%s]", info.Command, want)
	}
	if err := c.ProcStdin(context.Background(), info.ID, strings.NewReader("echo in-$TERM; exit 5\n"), false); err != nil {
		t.Fatal(err)
	}
	out := follow(t, c, info.ID, 0)
	if !strings.Contains(out.stdout, "in-xterm-256color") || out.res.Proc.ExitCode != 5 {
		t.Errorf("shell = %+v with output %q", out.res.Proc, out.stdout)
	}
}

// The end of input ends cat; stdout and stderr stay apart without a tty.
func TestProcStdin(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	tests := []struct {
		name       string
		req        ProcRequest
		input      string
		wantOut    string
		wantErrOut string
	}{
		{"pipe", ProcRequest{Shell: "cat; echo done >&2", Stdin: true}, "piped\x00bytes", "piped\x00bytes", "done\n"},
		{"tty", ProcRequest{Command: []string{"cat"}, TTY: true}, "line\n", "line\r\nline\r\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := startProc(t, c, tt.req)
			if err := c.ProcStdin(ctx, info.ID, strings.NewReader(tt.input), true); err != nil {
				t.Fatal(err)
			}
			out := follow(t, c, info.ID, 0)
			if out.stdout != tt.wantOut || out.stderr != tt.wantErrOut || out.res.Proc.ExitCode != 0 {
				t.Errorf("got %q / %q, %+v; want %q / %q", out.stdout, out.stderr, out.res.Proc, tt.wantOut, tt.wantErrOut)
			}
		})
	}
	none := startProc(t, c, ProcRequest{Command: []string{"cat"}})
	if err := c.ProcStdin(ctx, none.ID, strings.NewReader("x"), false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("input to a process without stdin: %v, want failed precondition", err)
	}
	if out := follow(t, c, none.ID, 0); out.res.Proc.ExitCode != 0 {
		t.Errorf("cat of /dev/null = %+v", out.res.Proc)
	}
}

// Output a writer missed while it was away is read again from its offset.
func TestProcReplay(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	info := startProc(t, c, ProcRequest{Shell: `echo one; read x; echo two; read x; echo three`, TTY: true})
	a, err := c.AttachProc(ctx, info.ID, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "one\r\n" {
		t.Fatalf("first read %q, %v", buf, err)
	}
	a.Close()
	res, _ := a.Wait()
	if res.Next != 5 || res.Missed != 0 {
		t.Fatalf("detached at %+v, want next 5", res)
	}
	waitFor(t, "the writer to go", func() bool {
		p, err := c.Proc(ctx, info.ID)
		return err == nil && !p.Writer
	})
	// While nobody is attached, the process goes on.
	if err := c.ProcStdin(ctx, info.ID, strings.NewReader("\n"), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two", func() bool {
		p, err := c.Proc(ctx, info.ID)
		return err == nil && p.Output >= 12
	})
	b, err := c.AttachProc(ctx, info.ID, AttachOptions{Since: res.Next})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(b)
	if err != nil || string(rest) != "\r\ntwo\r\n\r\nthree\r\n" {
		t.Errorf("replay %q, %v", rest, err)
	}
	end, err := b.Wait()
	if err != nil || end.Proc.Running || end.Next != end.Proc.Output || end.Missed != 0 {
		t.Errorf("end = %+v, %v", end, err)
	}
}

// A reader older than the ring gets what is left and learns what it
// missed; stdout and stderr keep apart across the wrap.
func TestProcRingOverflow(t *testing.T) {
	c, _ := startAgent(t)
	info := startProc(t, c, ProcRequest{Shell: `head -c 10000 /dev/zero | tr '\0' o; sleep 0.1; printf eee >&2; sleep 0.1; printf ooo`, OutputLimit: 4096})
	follow(t, c, info.ID, 0)
	out := follow(t, c, info.ID, 0)
	if out.res.Missed != 10006-4096 || out.res.Next != 10006 || out.res.Proc.OutputStart != 10006-4096 {
		t.Errorf("read %+v, want 5910 missed of 10006", out.res)
	}
	if want := strings.Repeat("o", 4096-6) + "ooo"; out.stdout != want || out.stderr != "eee" {
		t.Errorf("got %d bytes of stdout, stderr %q", len(out.stdout), out.stderr)
	}
	tail := follow(t, c, info.ID, 10003)
	if tail.stdout != "ooo" || tail.res.Missed != 0 {
		t.Errorf("read from 10003: %q %+v", tail.stdout, tail.res)
	}
}

// Multi-byte characters arrive whole and in order, however the reads of
// the pty cut them.
func TestProcUTF8(t *testing.T) {
	c, _ := startAgent(t)
	want := strings.Repeat("─", 3000)
	for _, tty := range []bool{false, true} {
		info := startProc(t, c, ProcRequest{Shell: `i=0; while [ $i -lt 30 ]; do printf '` + strings.Repeat("─", 100) + `'; i=$((i+1)); done`, TTY: tty})
		a, err := c.AttachProc(context.Background(), info.ID, AttachOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		small := make([]byte, 7) // cuts characters across reads
		for {
			n, err := a.Read(small)
			got.Write(small[:n])
			if err != nil {
				break
			}
		}
		if got.String() != want || !utf8.Valid(got.Bytes()) {
			t.Errorf("tty=%v: %d bytes, %d characters, want 3000 ─", tty, got.Len(), utf8.RuneCount(got.Bytes()))
		}
		if out := follow(t, c, info.ID, 0); out.stdout != want {
			t.Errorf("tty=%v: output read again: %d bytes", tty, len(out.stdout))
		}
	}
}

// A reader that falls behind does not make the agent hold more than the
// ring: it is overtaken and told so.
func TestProcSlowReader(t *testing.T) {
	c, _ := startAgent(t)
	info := startProc(t, c, ProcRequest{Shell: `head -c 200000000 /dev/zero`})
	a, err := c.AttachProc(context.Background(), info.ID, AttachOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	buf := make([]byte, 4096)
	var peak uint64
	for i := 0; ; i++ {
		n, err := a.Read(buf)
		if err != nil {
			break
		}
		if i < 50 {
			time.Sleep(20 * time.Millisecond) // slow at first, while the process runs
		}
		if i%20 == 0 {
			peak = max(peak, heap())
		}
		_ = n
	}
	res, err := a.Wait()
	if err != nil || res.Proc.Running || res.Proc.Output != 200000000 || res.Missed == 0 || res.Next != 200000000 {
		t.Fatalf("end %+v, %v; want the end at 200000000 after a gap", res, err)
	}
	if peak > before+16<<20 {
		t.Errorf("heap grew from %d to %d bytes for a slow reader", before, peak)
	}
}

// With flow control, a slow writer attachment misses nothing: the
// process waits for it (and, with AwaitWriter, for the first writer to
// attach); a reader beside it, or the writer's departure, never blocks
// the process.
func TestProcFlowControl(t *testing.T) {
	c, _ := startAgent(t)
	const total = 20 << 20
	for _, tc := range []struct {
		name     string
		flow     bool
		await    bool
		late     bool // the attachment comes after the process outran the ring
		readOnly bool
		missed   bool
	}{
		{name: "writer with flow control", flow: true},
		{name: "reader with flow control", flow: true, readOnly: true, missed: true},
		{name: "writer without flow control", missed: true},
		{name: "late writer, awaited", flow: true, await: true, late: true},
		{name: "late writer, not awaited", flow: true, late: true, missed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An attachment that is not late comes before the first byte:
			// the process waits for a line that is sent once it is there
			// (on a loaded host an attachment can take longer than the
			// process takes to outrun the ring).
			shell := "head -c " + strconv.Itoa(total) + " /dev/zero"
			if !tc.late {
				shell = "read _; " + shell
			}
			req := ProcRequest{Shell: shell, Stdin: true, FlowControl: tc.flow, AwaitWriter: tc.await}
			info := startProc(t, c, req)
			if tc.late {
				time.Sleep(500 * time.Millisecond)
			}
			a, err := c.AttachProc(context.Background(), info.ID, AttachOptions{ReadOnly: tc.readOnly})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if !tc.late {
				if err := c.ProcStdin(context.Background(), info.ID, strings.NewReader("go\n"), false); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(500 * time.Millisecond) // the process outruns the ring meanwhile, unless held
			n, err := io.Copy(io.Discard, a)
			res, werr := a.Wait()
			if err != nil || werr != nil || res.Proc.Running || res.Next != total {
				t.Fatalf("read %d bytes, %v; end %+v, %v", n, err, res, werr)
			}
			if missed := res.Missed > 0; missed != tc.missed || n != total-res.Missed {
				t.Errorf("read %d bytes, missed %d; want missed: %v", n, res.Missed, tc.missed)
			}
		})
	}

	// A writer that stops reading and goes away lets the process go on.
	info := startProc(t, c, ProcRequest{Shell: "head -c " + strconv.Itoa(total) + " /dev/zero; echo done >&2", Stdin: true, FlowControl: true})
	a, err := c.AttachProc(context.Background(), info.ID, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if p, err := c.Proc(context.Background(), info.ID); err != nil || !p.Running {
		t.Fatalf("a held process: %+v, %v; want it running", p, err)
	}
	a.Close()
	if out := follow(t, c, info.ID, 0); out.res.Proc.ExitCode != 0 || !strings.Contains(out.stderr, "done") {
		t.Errorf("after the writer left: %+v", out.res.Proc)
	}
	// And killing a held process does not wait for its writer.
	info = startProc(t, c, ProcRequest{Shell: "head -c " + strconv.Itoa(total) + " /dev/zero", Stdin: true, FlowControl: true})
	if a, err = c.AttachProc(context.Background(), info.ID, AttachOptions{}); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if p, err := c.KillProc(context.Background(), info.ID); err != nil || p.Running || time.Since(start) > 5*time.Second {
		t.Errorf("kill a held process: %+v, %v after %s", p, err, time.Since(start))
	}
}

// One writer at a time; a second takes over only when it says so;
// readers see the output too.
func TestProcTakeover(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	info := startProc(t, c, ProcRequest{Command: []string{"cat"}, TTY: true})
	first, err := c.AttachProc(ctx, info.ID, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := c.AttachProc(ctx, info.ID, AttachOptions{}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("a second writer: %v, want failed precondition", err)
	}
	reader, err := c.AttachProc(ctx, info.ID, AttachOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := reader.Write([]byte("x")); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("input from a reader: %v, want failed precondition", err)
	}
	second, err := c.AttachProc(ctx, info.ID, AttachOptions{Takeover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_, _ = io.Copy(io.Discard, first)
	if _, err := first.Wait(); !errors.Is(err, ErrTakenOver) || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("the first writer's end: %v, want taken over", err)
	}
	if p, _ := c.Proc(ctx, info.ID); !p.Writer {
		t.Errorf("info = %+v, want a writer", p)
	}
	if _, err := second.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := second.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]*ProcAttachment{"writer": second, "reader": reader} {
		out, _ := io.ReadAll(a)
		res, err := a.Wait()
		if string(out) != "hello\r\nhello\r\n" || err != nil || res.Proc.Running || res.Proc.ExitCode != 0 {
			t.Errorf("%s: %q, %+v, %v", name, out, res.Proc, err)
		}
	}
}

// A writer that closes its attachment leaves the place free at once: a
// client that detaches and attaches again (a terminal's ~.) is not
// refused as a second writer, whether or not it read the output.
func TestProcWriterReattach(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	info := startProc(t, c, ProcRequest{Shell: "while :; do echo tick; sleep 0.01; done", TTY: true})
	for i := range 40 {
		a, err := c.AttachProc(ctx, info.ID, AttachOptions{})
		if err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		if i%2 == 0 {
			buf := make([]byte, 4)
			if _, err := io.ReadFull(a, buf); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
}

// openFDs counts the test process's open files.
// fdBaseline returns the number of files the process has open once those
// opened on first use and kept are (the runtime's poller, the process's
// OOM trampoline): what a test that leaves nothing behind ends with.
func fdBaseline(t *testing.T) int {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close()
	_, _ = processOOMExec()
	return openFDs(t)
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A process leaves no process and no file behind, once deleted or once
// the agent stops.
func TestProcNoLeak(t *testing.T) {
	for _, how := range []string{"delete", "stop"} {
		t.Run(how, func(t *testing.T) {
			before := fdBaseline(t)
			sock, _, stop := serveAgent(t, func(dir string) ServerConfig {
				return ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: dir, UID: -1, GID: -1}
			})
			c := NewClient(UnixDialer(sock), "")
			tag := newTag(t)
			var ids []string
			for _, req := range []ProcRequest{
				{Shell: "sleep " + tag + " & sleep " + tag, TTY: true},
				{Shell: "setsid sleep " + tag + " & sleep " + tag, Stdin: true},
				{Command: []string{"sh", "-c", "trap '' TERM HUP; sleep " + tag}},
				{Shell: "echo ends by itself", TTY: true},
			} {
				ids = append(ids, startProc(t, c, req).ID)
			}
			a, err := c.AttachProc(context.Background(), ids[0], AttachOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if how == "delete" {
				for _, id := range ids {
					if _, err := c.KillProc(context.Background(), id); err != nil {
						t.Fatal(err)
					}
				}
				if list, err := c.Procs(context.Background()); err != nil || len(list) != 0 {
					t.Errorf("list after DELETE = %+v, %v", list, err)
				}
			} else {
				stop()
			}
			waitGone(t, tag, "after "+how)
			_, _ = io.Copy(io.Discard, a)
			if _, err := a.Wait(); err != nil {
				t.Errorf("attachment after %s: %v", how, err)
			}
			a.Close()
			c.Close()
			stop()
			waitFor(t, "the files to close", func() bool { return openFDs(t) <= before })
		})
	}
}

// As root, a process runs as the sandbox user, owns its tty, and has the
// commands' out-of-memory score.
func TestProcAsUser(t *testing.T) {
	testenv.RequireRoot(t)
	sock, _, _ := serveAgent(t, func(string) ServerConfig {
		return ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: "/", UID: 65534, GID: 65534}
	})
	c := NewClient(UnixDialer(sock), "")
	t.Cleanup(c.Close)
	info := startProc(t, c, ProcRequest{Shell: `id -u; stat -c %u "$(tty)"; cat /proc/self/oom_score_adj`, TTY: true})
	out := follow(t, c, info.ID, 0)
	want := "65534\r\n65534\r\n" + strconv.Itoa(userOOMScore) + "\r\n"
	if out.stdout != want || out.res.Proc.ExitCode != 0 {
		t.Errorf("got %q, %+v; want %q", out.stdout, out.res.Proc, want)
	}
}

func TestRing(t *testing.T) {
	type write struct {
		stream byte
		data   string
	}
	type chunk struct {
		at     int64
		stream byte
		data   string
	}
	tests := []struct {
		name   string
		size   int
		writes []write
		from   int64
		want   []chunk
	}{
		{"empty", 8, nil, 0, nil},
		{"one stream", 8, []write{{'o', "abc"}, {'o', "de"}}, 0, []chunk{{0, 'o', "abcde"}}},
		{"from the middle", 8, []write{{'o', "abcde"}}, 2, []chunk{{2, 'o', "cde"}}},
		{"streams apart", 8, []write{{'o', "ab"}, {'e', "cd"}, {'o', "e"}}, 0,
			[]chunk{{0, 'o', "ab"}, {2, 'e', "cd"}, {4, 'o', "e"}}},
		{"wrapped", 4, []write{{'o', "abc"}, {'e', "def"}}, 0, []chunk{{2, 'o', "c"}, {3, 'e', "def"}}},
		{"larger than the ring", 4, []write{{'o', "abcdefghij"}}, 3, []chunk{{6, 'o', "ghij"}}},
		{"past the end", 4, []write{{'o', "ab"}}, 9, nil},
		{"utf-8 cut at the start", 3, []write{{'o', "─b"}}, 0, []chunk{{3, 'o', "b"}}},
		{"utf-8 whole", 4, []write{{'o', "a─"}}, 0, []chunk{{0, 'o', "a─"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.size)
			for _, w := range tt.writes {
				r.write(w.stream, []byte(w.data))
			}
			r.close()
			var got []chunk
			buf := make([]byte, 3)
			for from := tt.from; ; {
				at, stream, n, wait := r.read(from, buf)
				if n == 0 {
					if wait != nil {
						t.Fatal("a closed ring waits")
					}
					break
				}
				if k := len(got) - 1; k >= 0 && got[k].stream == stream && got[k].at+int64(len(got[k].data)) == at {
					got[k].data += string(buf[:n])
				} else {
					got = append(got, chunk{at, stream, string(buf[:n])})
				}
				from = at + int64(n)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("read %v, want %v", got, tt.want)
			}
		})
	}
}

// A ring drops its oldest output with its oldest record when the streams
// alternate more often than it keeps records.
func TestRingSegments(t *testing.T) {
	r := newRing(1 << 20)
	for i := range maxRingSegments + 10 {
		r.write([]byte{frameStdout, frameStderr}[i%2], []byte("x"))
	}
	if start, end := r.held(); start != 10 || end != maxRingSegments+10 || len(r.segs) != maxRingSegments {
		t.Errorf("held [%d, %d) in %d records", start, end, len(r.segs))
	}
}

// The signal names and numbers a client may send.
func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "sigint": syscall.SIGINT, "SIGKILL": syscall.SIGKILL, "9": syscall.SIGKILL, "WINCH": syscall.SIGWINCH} {
		if got, err := parseSignal(in); err != nil || got != want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "65", "NOPE"} {
		if _, err := parseSignal(in); err == nil {
			t.Errorf("parseSignal(%q) succeeded", in)
		}
	}
}

// StartFollowProc starts a process and reads it to its end in one
// exchange: its start first, then its output from the first byte, held
// for the read with flow control (nothing missed), while it holds the
// writer's place; a request the agent refuses starts nothing. Against an
// agent from before ?follow (which only starts the process), it starts
// and then attaches, to the same effect.
func TestProcStartFollow(t *testing.T) {
	const total = 20 << 20
	current, _ := startAgent(t)
	for _, agent := range []struct {
		name string
		c    *Client
	}{
		{"current agent", current},
		{"agent without follow", startOldAgent(t)},
	} {
		t.Run(agent.name, func(t *testing.T) {
			c, ctx := agent.c, context.Background()
			var info ProcInfo
			var n int64
			started := func(p ProcInfo) error {
				if n > 0 {
					t.Errorf("started after %d bytes of output", n)
				}
				info = p
				return nil
			}
			count := func(_ byte, _ int64, p []byte) error {
				if n == 0 {
					time.Sleep(300 * time.Millisecond) // the process would outrun the ring meanwhile, unless held
				}
				n += int64(len(p))
				return nil
			}
			res, err := c.StartFollowProc(ctx, ProcRequest{Shell: "head -c " + strconv.Itoa(total) + " /dev/zero", FlowControl: true, AwaitWriter: true}, started, count)
			if err != nil || res.Proc.Running || n != total || res.Missed != 0 || res.Next != total {
				t.Errorf("read %d bytes; end %+v, %v; want all %d", n, res, err, total)
			}
			if info.ID == "" || info.Pid == 0 || info.Started.IsZero() {
				t.Errorf("started %+v", info)
			}

			// It holds the writer's place; its input goes through ProcStdin.
			var out bytes.Buffer
			res, err = c.StartFollowProc(ctx, ProcRequest{Command: []string{"cat"}, Stdin: true, FlowControl: true, AwaitWriter: true}, func(p ProcInfo) error {
				if _, err := c.AttachProc(ctx, p.ID, AttachOptions{}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
					t.Errorf("a second writer: %v, want failed precondition", err)
				}
				return c.ProcStdin(ctx, p.ID, strings.NewReader("hello"), true)
			}, toWriters(&out, &out))
			if out.String() != "hello" || err != nil || res.Proc.ExitCode != 0 {
				t.Errorf("cat: %q, %+v, %v", out.String(), res.Proc, err)
			}

			// A client that leaves ends the read, not the process.
			cctx, cancel := context.WithCancel(ctx)
			_, err = c.StartFollowProc(cctx, ProcRequest{Shell: "sleep 0.3; echo done", FlowControl: true, AwaitWriter: true}, func(p ProcInfo) error {
				info = p
				cancel()
				return nil
			}, toWriters(io.Discard, io.Discard))
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a read whose context ended: %v, want canceled", err)
			}
			if o := follow(t, c, info.ID, 0); o.res.Proc.ExitCode != 0 || o.stdout != "done\n" {
				t.Errorf("the process after its reader left: %+v, %q", o.res.Proc, o.stdout)
			}

			before, err := c.Procs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			none := func(ProcInfo) error { t.Error("a refused start started"); return nil }
			if _, err := c.StartFollowProc(ctx, ProcRequest{Command: []string{"true"}, Cwd: "/nonexistent"}, none, toWriters(nil, nil)); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("a bad cwd: %v, want invalid argument", err)
			}
			if after, err := c.Procs(ctx); err != nil || len(after) != len(before) {
				t.Errorf("a refused start left %d processes, had %d (%v)", len(after), len(before), err)
			}
		})
	}
}

// startOldAgent is startAgent behind a proxy that drops the query of
// POST /v1/procs: an agent from before its ?follow.
func startOldAgent(t *testing.T) *Client {
	t.Helper()
	sock, _, _ := serveAgent(t, func(dir string) ServerConfig {
		return ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: dir, UID: -1, GID: -1}
	})
	front := filepath.Join(t.TempDir(), "front.sock")
	l, err := net.Listen("unix", front)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go proxyNoPostQuery(conn, sock)
		}
	}()
	c := NewClient(UnixDialer(front), "")
	t.Cleanup(c.Close)
	return c
}

// proxyNoPostQuery relays conn to the agent at sock, without the query of
// POST /v1/procs; after an upgrade, it relays the bytes as they are.
func proxyNoPostQuery(conn net.Conn, sock string) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	up, err := net.Dial("unix", sock)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		_, _ = io.Copy(conn, up)
		conn.Close()
	}()
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.Method == http.MethodPost && req.URL.Path == "/v1/procs" {
			req.URL.RawQuery = ""
		}
		if err := req.Write(up); err != nil {
			return
		}
		if req.Header.Get("Upgrade") != "" {
			_, _ = io.Copy(up, br) // switched: the rest is the protocol's
			return
		}
	}
}

// gatedAgent serves an agent and returns a client whose dials wait while
// the returned hold is in force (as a checkpoint's gate holds the
// daemon's), and a client that never waits, to look on; its processes
// wait grace for a suspended writer (0: suspendGrace).
func gatedAgent(t *testing.T, grace time.Duration) (gated, free *Client, hold func() (release func())) {
	t.Helper()
	_, work := startAgent(t) // for its directory's layout only
	sock, _, _ := serveAgent(t, func(string) ServerConfig {
		return ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: work, UID: -1, GID: -1, SuspendGrace: grace}
	})
	var mu sync.Mutex
	var held chan struct{}
	dial := UnixDialer(sock)
	gated = NewClient(func(ctx context.Context) (net.Conn, error) {
		mu.Lock()
		h := held
		mu.Unlock()
		if h != nil {
			select {
			case <-h:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return dial(ctx)
	}, "")
	free = NewClient(dial, "")
	t.Cleanup(gated.Close)
	t.Cleanup(free.Close)
	hold = func() func() {
		h := make(chan struct{})
		mu.Lock()
		held = h
		mu.Unlock()
		return sync.OnceFunc(func() {
			mu.Lock()
			held = nil
			mu.Unlock()
			close(h)
		})
	}
	return gated, free, hold
}

// TestProcSuspend: an attachment suspended for a checkpoint lets go of
// its connection, and attaches again once the dial is let through, from
// where its output stopped: nothing missed, nothing twice, its input
// held meanwhile and taken after; a process that ends with its writer
// waits for it, within suspendGrace, and ends after it.
func TestProcSuspend(t *testing.T) {
	for _, tc := range []struct {
		name     string
		readOnly bool
		grace    time.Duration
		held     time.Duration
		survives bool
	}{
		{name: "writer", grace: time.Minute, held: 300 * time.Millisecond, survives: true},
		{name: "reader", readOnly: true, grace: time.Minute, held: 300 * time.Millisecond, survives: true},
		{name: "past the grace", grace: 100 * time.Millisecond, held: 600 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, free, hold := gatedAgent(t, tc.grace)
			ctx := context.Background()
			// One that ends with its writer, and writes as it goes.
			info, err := free.StartProc(ctx, ProcRequest{Command: []string{"bash", "-c",
				"(i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.02; done) & while read l; do echo got $l; done"}, Stdin: true, EndWithWriter: true})
			if err != nil {
				t.Fatal(err)
			}
			writer, err := c.AttachProc(ctx, info.ID, AttachOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Close()
			att := writer
			if tc.readOnly {
				if att, err = c.AttachProc(ctx, info.ID, AttachOptions{ReadOnly: true}); err != nil {
					t.Fatal(err)
				}
				defer att.Close()
			}
			var mu sync.Mutex
			var out bytes.Buffer
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := att.Read(buf)
					mu.Lock()
					out.Write(buf[:n])
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
			seen := func(s string) func() bool {
				return func() bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(out.String(), s) }
			}
			waitFor(t, "the first ticks", seen("tick 3\n"))

			release := hold()
			_, resume := c.SuspendAttachments()
			waitFor(t, "the agent to let go of the writer", func() bool {
				p, err := free.Proc(ctx, info.ID)
				return err == nil && !p.Writer
			})
			typed := make(chan error, 1)
			if !tc.readOnly {
				go func() { _, err := writer.Write([]byte("hello\n")); typed <- err }()
			}
			time.Sleep(tc.held)
			resume()
			release()
			if !tc.survives {
				if _, err := att.Wait(); err == nil {
					t.Errorf("the attachment to a process ended past the grace: Wait = nil")
				}
				if p, err := free.Proc(ctx, info.ID); !errors.Is(err, errdefs.ErrNotFound) {
					t.Errorf("the process past the grace: %+v, %v; want it ended and gone", p, err)
				}
				return
			}
			if !tc.readOnly {
				if err := <-typed; err != nil {
					t.Fatalf("input written while suspended: %v", err)
				}
				waitFor(t, "the input written while suspended", seen("got hello\n"))
			}
			mu.Lock()
			last := strings.Count(out.String(), "tick ")
			mu.Unlock()
			waitFor(t, "ticks after the suspension", seen(fmt.Sprintf("tick %d\n", last+5)))
			// Every tick once, in order: the output went on from where it
			// stopped.
			mu.Lock()
			got := out.String()
			mu.Unlock()
			n := 0
			for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
				if strings.HasPrefix(line, "tick ") {
					n++
					if line != fmt.Sprintf("tick %d", n) {
						t.Fatalf("output %q: line %q, want tick %d", got, line, n)
					}
				}
			}
			if p, err := free.Proc(ctx, info.ID); err != nil || !p.Running || (!tc.readOnly && !p.Writer) {
				t.Errorf("the process after the suspension: %+v, %v", p, err)
			}
		})
	}
}

// TestProcSuspendStuckWrite: an attachment whose input is stuck (its
// process reads none) is not suspended, and the suspension does not wait
// for it longer than suspendWait; Close still ends it.
func TestProcSuspendStuckWrite(t *testing.T) {
	c, free, hold := gatedAgent(t, 0)
	ctx := context.Background()
	info, err := free.StartProc(ctx, ProcRequest{Command: []string{"sleep", "60"}, Stdin: true, EndWithWriter: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.AttachProc(ctx, info.ID, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = a.Write(make([]byte, 8<<20)) }() // more than the pipe and the buffers take
	time.Sleep(300 * time.Millisecond)
	release := hold()
	defer release()
	start := time.Now()
	_, resume := c.SuspendAttachments()
	defer resume()
	if took := time.Since(start); took > suspendWait+time.Second {
		t.Errorf("the suspension waited %v for a stuck write", took)
	}
	if p, err := free.Proc(ctx, info.ID); err != nil || !p.Writer {
		t.Errorf("the attachment with a stuck write: %+v, %v; want it left attached", p, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close of an attachment with a stuck write did not return")
	}
}
