package image

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// fakeBuilder is an Ensurer whose images are stored when the test says so
// and whose Ensure runs build, recording the refs it was asked for.
type fakeBuilder struct {
	mu     sync.Mutex
	stored map[string]bool
	calls  []string
	build  func(ctx context.Context, ref string, p ProgressFunc) error
}

func (f *fakeBuilder) Get(ctx context.Context, ref string) (*Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stored[ref] {
		return &Image{Ref: ref}, nil
	}
	return nil, errdefs.NotFound("image %s not found", ref)
}

func (f *fakeBuilder) Ensure(ctx context.Context, ref string, p ProgressFunc) (*Image, error) {
	f.mu.Lock()
	f.calls = append(f.calls, ref)
	f.mu.Unlock()
	if f.build != nil {
		if err := f.build(ctx, ref, p); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stored[ref] = true
	return &Image{Ref: ref}, nil
}

func (f *fakeBuilder) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// logRecorder is a slog handler keeping each record at info or above as
// "LEVEL msg k=v...".
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *logRecorder) WithGroup(string) slog.Handler                 { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	return nil
}

func (l *logRecorder) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func TestPrebuild(t *testing.T) {
	refs := []string{"agent2env/code-interpreter", "agent2env/python", "python:3.12", "agent2env/code-interpreter:latest",
		"agent2env/node", "not a ref"}
	boom := errors.New("mmdebstrap: exit status 1")
	tests := []struct {
		name      string
		stored    []string
		fail      string // the ref whose build fails
		wantCalls []string
		wantErr   bool // Run returns before ctx ends, with the failure
		wantLogs  []string
	}{
		{
			name:      "builds the missing built-in images in order, once each",
			stored:    []string{"agent2env/python:latest"},
			wantCalls: []string{"agent2env/code-interpreter:latest", "agent2env/node:latest"},
			wantLogs: []string{
				"INFO building image in the background ref=agent2env/code-interpreter:latest",
				"INFO built image ref=agent2env/code-interpreter:latest took=0s",
				"INFO building image in the background ref=agent2env/node:latest",
				"INFO built image ref=agent2env/node:latest took=0s",
			},
		},
		{
			name:      "nothing to build",
			stored:    []string{"agent2env/python:latest", "agent2env/code-interpreter:latest", "agent2env/node:latest"},
			wantCalls: nil,
		},
		{
			name:      "a failure is logged, the next image built, and Run fails for its supervisor to retry",
			fail:      "agent2env/code-interpreter:latest",
			wantCalls: []string{"agent2env/code-interpreter:latest", "agent2env/python:latest", "agent2env/node:latest"},
			wantErr:   true,
			wantLogs: []string{
				"INFO building image in the background ref=agent2env/code-interpreter:latest",
				"ERROR background image build failed ref=agent2env/code-interpreter:latest after=0s err=" + boom.Error(),
				"INFO building image in the background ref=agent2env/python:latest",
				"INFO built image ref=agent2env/python:latest took=0s",
				"INFO building image in the background ref=agent2env/node:latest",
				"INFO built image ref=agent2env/node:latest took=0s",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeBuilder{stored: map[string]bool{}, build: func(ctx context.Context, ref string, p ProgressFunc) error {
				if ref == tt.fail {
					return boom
				}
				return nil
			}}
			for _, ref := range tt.stored {
				f.stored[ref] = true
			}
			var logs logRecorder
			b := NewPrebuild(f, func(context.Context) []string { return refs }, slog.New(&logs))
			b.now = func() time.Time { return time.Time{} }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- b.Run(ctx) }()
			if tt.wantErr {
				err := <-done
				if !errors.Is(err, boom) || !strings.Contains(err.Error(), tt.fail) {
					t.Errorf("Run = %v, want the failure of %s", err, tt.fail)
				}
			} else {
				// Run waits for ctx once all is built.
				for deadline := time.Now().Add(10 * time.Second); len(f.called()) < len(tt.wantCalls); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("built %v, want %v", f.called(), tt.wantCalls)
					}
				}
				select {
				case err := <-done:
					t.Fatalf("Run returned %v before its context ended", err)
				case <-time.After(20 * time.Millisecond):
				}
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("Run after cancel = %v", err)
				}
			}
			cancel()
			if diff := cmp.Diff(tt.wantCalls, f.called()); diff != "" {
				t.Errorf("Ensure calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantLogs, logs.all()); diff != "" {
				t.Errorf("logs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPrebuildStops cancels Run in the middle of a build: the build's
// context ends, Run returns at once, and the log says it stopped.
func TestPrebuildStops(t *testing.T) {
	started := make(chan struct{})
	stopped := make(chan struct{})
	f := &fakeBuilder{stored: map[string]bool{}, build: func(ctx context.Context, ref string, p ProgressFunc) error {
		close(started)
		<-ctx.Done()
		close(stopped)
		return ctx.Err()
	}}
	var logs logRecorder
	b := NewPrebuild(f, func(context.Context) []string { return []string{"agent2env/code-interpreter"} }, slog.New(&logs))
	b.now = func() time.Time { return time.Time{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	<-started
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running 10s after its context ended")
	}
	<-stopped
	want := []string{
		"INFO building image in the background ref=agent2env/code-interpreter:latest",
		"INFO background image build stopped ref=agent2env/code-interpreter:latest after=0s",
	}
	if diff := cmp.Diff(want, logs.all()); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
}

// TestPrebuildLogsProgress checks the rate of progress logs: every new
// phase at once, within a phase at most one an interval.
func TestPrebuildLogsProgress(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	f := &fakeBuilder{stored: map[string]bool{}, build: func(ctx context.Context, ref string, p ProgressFunc) error {
		for _, step := range []struct {
			at time.Duration
			ev Progress
		}{
			{0, Progress{Phase: PhaseBuild, Item: "I: chroot architecture amd64 is equal to the host's architecture"}},
			{time.Second, Progress{Phase: PhaseBuild, Item: "Setting up libc6"}},        // too soon
			{10 * time.Second, Progress{Phase: PhaseBuild, Item: "Setting up python3"}}, // still too soon
			{16 * time.Second, Progress{Phase: PhaseBuild, Item: "Setting up python3-numpy"}},
			{17 * time.Second, Progress{Phase: PhaseUnpack, Item: "sha256:l", Total: 400}}, // a new phase
			{18 * time.Second, Progress{Phase: PhaseUnpack, Item: "sha256:l", Current: 100, Total: 400}},
			{40 * time.Second, Progress{Phase: PhaseUnpack, Item: "sha256:l", Current: 300, Total: 400}},
			{41 * time.Second, Progress{Phase: PhaseDone, Item: ref}},
		} {
			now = start.Add(step.at)
			p(step.ev)
		}
		return nil
	}}
	var logs logRecorder
	b := NewPrebuild(f, func(context.Context) []string { return []string{"agent2env/python"} }, slog.New(&logs))
	b.now = func() time.Time { return now }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.build(ctx, "agent2env/python:latest")
	const ref = "ref=agent2env/python:latest"
	want := []string{
		"INFO building image in the background " + ref,
		"INFO building image " + ref + " phase=build elapsed=0s item=I: chroot architecture amd64 is equal to the host's architecture",
		"INFO building image " + ref + " phase=build elapsed=16s item=Setting up python3-numpy",
		"INFO building image " + ref + " phase=unpack elapsed=17s item=sha256:l total=400 percent=0",
		"INFO building image " + ref + " phase=unpack elapsed=40s item=sha256:l bytes=300 total=400 percent=75",
		"INFO building image " + ref + " phase=done elapsed=41s item=agent2env/python:latest",
		"INFO background image build stopped " + ref + " after=41s",
	}
	if diff := cmp.Diff(want, logs.all()); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
}
