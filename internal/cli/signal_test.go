package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// A command a signal interrupts exits 128+n, as a shell's command the
// signal killed, and prints nothing of the request it cut short.
func TestInterruptedExitCode(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			d := newFakeDaemon(t)
			d.addSandbox(api.Sandbox{ID: "sb1", Status: api.StatusRunning})
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			time.AfterFunc(200*time.Millisecond, func() { cancel(&signalError{sig: sig}) })
			code, stdout, stderr := runCtx(ctx, t, "sandbox", "exec", "sb1", "--", "sleep")
			if want := 128 + int(sig); code != want || stdout != "" || stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and nothing", code, stdout, stderr, want)
			}
		})
	}
}

// A sandbox create interrupted while it waits for the sandbox to run
// removes the sandbox, whose id it has not printed.
func TestInterruptedCreate(t *testing.T) {
	d := newFakeDaemon(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	time.AfterFunc(200*time.Millisecond, func() { cancel(&signalError{sig: syscall.SIGINT}) })
	code, stdout, _ := runCtx(ctx, t, "sandbox", "create", "--image", "stuck")
	if code != 130 || stdout != "" {
		t.Errorf("exit %d, stdout %q; want 130 and nothing", code, stdout)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.creates) != 1 || len(d.sandboxes) != 0 {
		t.Errorf("%d creates left %d sandboxes, want 1 create and none left", len(d.creates), len(d.sandboxes))
	}
}

// interrupted makes an error the interruption only when it comes of it.
func TestInterrupted(t *testing.T) {
	sigint := &signalError{sig: syscall.SIGINT}
	other := errors.New("sandbox sb1 not found")
	tests := []struct {
		name  string
		cause error // what cancelled the command's context; nil: nothing did
		err   error
		want  error
	}{
		{"no error", sigint, nil, nil},
		{"a request cut short", sigint, &url.Error{Op: "Post", URL: "http://d/exec/stream", Err: sigint}, sigint},
		{"a wait given up", sigint, fmt.Errorf("watch runs: %w", context.Canceled), sigint},
		{"another failure", sigint, other, other},
		{"cancelled but not by a signal", context.Canceled, context.Canceled, context.Canceled},
		{"not cancelled", nil, other, other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if tt.cause != nil {
				cancel(tt.cause)
			}
			if got := interrupted(ctx, tt.err); got != tt.want && !errors.Is(got, tt.want) {
				t.Errorf("interrupted(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// runCtx runs the CLI as Main does, with ctx.
func runCtx(ctx context.Context, t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}
