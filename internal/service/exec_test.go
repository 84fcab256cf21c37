package service

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

func TestExec(t *testing.T) {
	e := newEnv(t, "")
	id := e.running(t).ID
	tests := []struct {
		name  string
		id    string
		req   api.ExecRequest
		class error
		want  api.ExecResponse // DurationMS ignored
	}{
		{name: "output and exit code", req: api.ExecRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}},
			want: api.ExecResponse{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}},
		{name: "stdin, env and cwd", req: api.ExecRequest{Command: []string{"sh", "-c", `cat; echo " $X"; pwd`},
			Stdin: "in", Env: map[string]string{"X": "y"}, Cwd: "/etc"},
			want: api.ExecResponse{Stdout: "in y\n/etc\n"}},
		{name: "output past the limit", req: api.ExecRequest{Command: []string{"head", "-c", "1500", "/dev/zero"}},
			want: api.ExecResponse{Stdout: string(make([]byte, 1000)), Truncated: true}},
		{name: "timed out", req: api.ExecRequest{Command: []string{"sleep", "10"}, Timeout: 1},
			want: api.ExecResponse{ExitCode: 137, TimedOut: true}},
		{name: "negative timeout", req: api.ExecRequest{Command: []string{"true"}, Timeout: -1}, class: errdefs.ErrInvalidArgument},
		{name: "timeout over the maximum", req: api.ExecRequest{Command: []string{"true"}, Timeout: 24*3600 + 1}, class: errdefs.ErrInvalidArgument},
		// As a time.Duration, 18446744074 s (2^64 ns / 1e9, rounded up)
		// wraps around to 0.29 s.
		{name: "timeout that overflows", req: api.ExecRequest{Command: []string{"true"}, Timeout: 18446744074}, class: errdefs.ErrInvalidArgument},
		{name: "no command", req: api.ExecRequest{}, class: errdefs.ErrInvalidArgument},
		{name: "unknown sandbox", id: "nosuch", req: api.ExecRequest{Command: []string{"true"}}, class: errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sid := tt.id
			if sid == "" {
				sid = id
			}
			got, release, err := e.sb.Exec(context.Background(), sid, tt.req)
			checkErr(t, err, tt.class, "")
			if tt.class != nil {
				return
			}
			release()
			if got.DurationMS <= 0 {
				t.Errorf("duration %v ms, want > 0", got.DurationMS)
			}
			got.DurationMS = 0
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("exec result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExecStream(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	id := e.running(t).ID

	// Refusals come before anything runs.
	refused := []struct {
		name  string
		id    string
		req   api.ExecRequest
		class error
	}{
		{"no command", id, api.ExecRequest{}, errdefs.ErrInvalidArgument},
		{"negative timeout", id, api.ExecRequest{Command: []string{"true"}, Timeout: -1}, errdefs.ErrInvalidArgument},
		{"bad env", id, api.ExecRequest{Command: []string{"true"}, Env: map[string]string{"A=B": "c"}}, errdefs.ErrInvalidArgument},
		{"unknown sandbox", "nosuch", api.ExecRequest{Command: []string{"true"}}, errdefs.ErrNotFound},
	}
	// A working directory the command could not start in is refused
	// before the stream, as a background command's; one reached through
	// a link is taken.
	for p, c := range map[string]string{"/workspace/dir/f": "x"} {
		if _, err := e.sb.Upload(ctx, id, p, 0o644, strings.NewReader(c)); err != nil {
			t.Fatal(err)
		}
	}
	if res, release, err := e.sb.Exec(ctx, id, api.ExecRequest{Command: []string{"ln", "-s", "dir", "link"}, Cwd: "/workspace"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("ln: %v %+v", err, res)
	} else {
		release()
	}
	refused = append(refused, []struct {
		name  string
		id    string
		req   api.ExecRequest
		class error
	}{
		{"missing cwd", id, api.ExecRequest{Command: []string{"true"}, Cwd: "/workspace/none"}, errdefs.ErrInvalidArgument},
		{"cwd a file", id, api.ExecRequest{Command: []string{"true"}, Cwd: "/workspace/dir/f"}, errdefs.ErrInvalidArgument},
	}...)
	// started runs a command, recording its events, "start" among them.
	started := func(id string, req api.ExecRequest) ([]api.ExecEvent, api.ExecEvent, error) {
		var events []api.ExecEvent
		exit, err := e.sb.ExecStream(ctx, id, req,
			func() { events = append(events, api.ExecEvent{Type: "start"}) },
			func(ev api.ExecEvent) error {
				events = append(events, ev)
				return nil
			})
		return events, exit, err
	}
	for _, tt := range refused {
		events, _, err := started(tt.id, tt.req)
		if len(events) != 0 {
			t.Errorf("%s: refused after %v", tt.name, events)
		}
		checkErr(t, err, tt.class, "")
	}
	if _, _, err := started(id, api.ExecRequest{Command: []string{"true"}, Cwd: "/workspace/link"}); err != nil {
		t.Errorf("cwd through a link: %v", err)
	}
	stopped := e.running(t).ID
	if _, err := e.sb.Stop(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	_, _, err := started(stopped, api.ExecRequest{Command: []string{"true"}})
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeSandboxNotReady)

	events, exit, err := started(id, api.ExecRequest{Command: []string{"sh", "-c", "echo out; sleep 0.1; echo err >&2; exit 2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []api.ExecEvent{{Type: "start"}, {Type: "stdout", Data: "out\n"}, {Type: "stderr", Data: "err\n"}}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if exit.Type != "exit" || exit.ExitCode != 2 || exit.TimedOut || exit.Duration <= 0 {
		t.Errorf("exit event %+v, want exit code 2 with a duration", exit)
	}

	// The start comes before any output, however long the command takes
	// to write its first byte.
	quiet, stop := context.WithCancel(ctx)
	start, done := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.sb.ExecStream(quiet, id, api.ExecRequest{Command: []string{"sleep", "5"}},
			func() { start <- struct{}{} }, func(api.ExecEvent) error { return nil })
	}()
	select {
	case <-start:
	case <-time.After(2 * time.Second):
		t.Error("no start within 2 s of a command that writes nothing for 5 s")
	}
	stop()
	<-done

	// An error from emit ends the command.
	gone := errors.New("client gone")
	if _, err := e.sb.ExecStream(ctx, id, api.ExecRequest{Command: []string{"sh", "-c", "echo out; sleep 10"}},
		nil, func(api.ExecEvent) error { return gone }); err == nil {
		t.Error("the command went on after emit failed")
	}
}

// binaryOutput is output that is not UTF-8: every byte value, then
// invalid sequences (a lone continuation byte, a cut character, an
// overlong NUL, a surrogate, a byte past U+10FFFF).
func binaryOutput() string {
	b := make([]byte, 0, 300)
	for i := range 256 {
		b = append(b, byte(i))
	}
	return string(b) + "\x80 \xe2\x82 \xc0\x80 \xed\xa0\x80 \xf5\x80\x80\x80 \xe2\x82\xac"
}

// A character the agent's reads cut, the command having written it in
// two pieces, comes whole in one text event, not as two U+FFFD; in base64
// the bytes come as they were written.
func TestExecStreamCutCharacter(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	id := e.running(t).ID
	cmd := []string{"sh", "-c", `printf 'a\303'; sleep 0.2; printf '\251b\n'; printf '\342\224' >&2`}
	for _, enc := range []string{api.OutputText, api.OutputBase64} {
		var events []string
		streamed := map[string]string{}
		_, err := e.sb.ExecStream(ctx, id, api.ExecRequest{Command: cmd, OutputEncoding: enc}, func() {},
			func(ev api.ExecEvent) error {
				b, err := api.DecodeOutput(ev.Data, ev.Encoding)
				if err != nil {
					t.Errorf("%s event: %v", ev.Type, err)
				}
				events = append(events, b)
				streamed[ev.Type] += b
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		// The stderr's cut character, which nothing completes, goes at
		// the end as it is.
		if want := map[string]string{"stdout": "aé" + "b\n", "stderr": "\342\224"}; !cmp.Equal(want, streamed) {
			t.Errorf("%s: streamed %q, want %q", enc, streamed, want)
		}
		if enc == api.OutputText && slices.ContainsFunc(events, func(s string) bool { return s == "a\303" }) {
			t.Errorf("text: an event ended in a cut character: %q", events)
		}
	}
}

// TestExecBase64 runs a command whose output is not UTF-8 with output
// encoding base64: Exec gives its exact bytes as they came (the surface
// encodes them as it writes them), ExecStream in base64 events, and an
// unknown encoding is refused before anything runs.
func TestExecBase64(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	id := e.running(t).ID
	out := binaryOutput()
	if _, err := e.sb.Upload(ctx, id, "/workspace/bin", 0o644, strings.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"sh", "-c", "cat bin; cat bin >&2"}

	res, release, err := e.sb.Exec(ctx, id, api.ExecRequest{Command: cmd, OutputEncoding: api.OutputBase64})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if res.Encoding != "" {
		t.Errorf("encoding %q, want the output as it came", res.Encoding)
	}
	for name, got := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr} {
		if got != out {
			t.Errorf("exec %s %q, want %q", name, got, out)
		}
	}

	streamed := map[string]string{}
	_, err = e.sb.ExecStream(ctx, id, api.ExecRequest{Command: cmd, OutputEncoding: api.OutputBase64}, func() {},
		func(ev api.ExecEvent) error {
			if ev.Encoding != api.OutputBase64 {
				t.Errorf("%s event encoding %q, want base64", ev.Type, ev.Encoding)
			}
			b, err := api.DecodeOutput(ev.Data, ev.Encoding)
			if err != nil {
				t.Errorf("%s event: %v", ev.Type, err)
			}
			streamed[ev.Type] += b
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"stdout": out, "stderr": out}, streamed); diff != "" {
		t.Errorf("streamed output (-want +got):\n%s", diff)
	}

	// Without it the output is as it was, unmarked: the JSON encoding of
	// a surface replaces what is not UTF-8.
	res, release, err = e.sb.Exec(ctx, id, api.ExecRequest{Command: cmd, OutputEncoding: api.OutputText})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if res.Encoding != "" || res.Stdout != out {
		t.Errorf("text exec: encoding %q, stdout %q", res.Encoding, res.Stdout)
	}

	bad := api.ExecRequest{Command: []string{"touch", "ran"}, OutputEncoding: "latin1"}
	_, _, err = e.sb.Exec(ctx, id, bad)
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	_, err = e.sb.ExecStream(ctx, id, bad, func() { t.Error("a stream in an unknown encoding started") },
		func(api.ExecEvent) error { return nil })
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
}
