package image

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

func TestParseRef(t *testing.T) {
	id := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		in      string
		want    string
		local   bool
		wantErr error
	}{
		{in: "python:3.12", want: "docker.io/library/python:3.12"},
		{in: "python", want: "docker.io/library/python:latest"},
		{in: "docker.io/library/python:3.12", want: "docker.io/library/python:3.12"},
		{in: "index.docker.io/library/python", want: "docker.io/library/python:latest"},
		{in: "docker.io/python:3.12", want: "docker.io/library/python:3.12"},
		{in: "ghcr.io/org/tool:v1", want: "ghcr.io/org/tool:v1"},
		{in: "127.0.0.1:5000/a/b", want: "127.0.0.1:5000/a/b:latest"},
		{in: "python@" + id, want: "docker.io/library/python@" + id},
		{in: "agent2env/python", want: "agent2env/python:latest", local: true},
		{in: "agent2env/node:latest", want: "agent2env/node:latest", local: true},
		{in: " agent2env/custom:v1 ", want: "agent2env/custom:v1", local: true},
		{in: id, want: id, local: true},
		{in: "", wantErr: errdefs.ErrInvalidArgument},
		{in: "Bad/Name", wantErr: errdefs.ErrInvalidArgument},
		{in: "agent2env/python@" + id, wantErr: errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := parseRef(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("parseRef(%q) error = %v, want %v", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRef(%q): %v", tt.in, err)
			}
			if r.key != tt.want || r.local != tt.local {
				t.Errorf("parseRef(%q) = %q local=%v, want %q local=%v", tt.in, r.key, r.local, tt.want, tt.local)
			}
			// Normalizing is idempotent.
			if r2, err := parseRef(r.key); err != nil || r2 != r {
				t.Errorf("parseRef(%q) = %+v, %v; want %+v", r.key, r2, err, r)
			}
		})
	}
}

func TestDedupLayers(t *testing.T) {
	tests := []struct {
		in, want []string
	}{
		{in: []string{"a", "b", "c"}, want: []string{"a", "b", "c"}},
		{in: []string{"empty", "a", "empty", "b"}, want: []string{"a", "empty", "b"}},
		{in: []string{"x", "x"}, want: []string{"x"}},
		{in: []string{}, want: []string{}},
	}
	for _, tt := range tests {
		if got := dedupLayers(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("dedupLayers(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestGroupSharesOneRun(t *testing.T) {
	var g group[int]
	var runs atomic.Int32
	release := make(chan struct{})
	fn := func(ctx context.Context, p ProgressFunc) (int, error) {
		runs.Add(1)
		p(Progress{Phase: PhaseBuild, Item: "step"})
		<-release
		p(Progress{Phase: PhaseDone, Item: "x"})
		return 42, nil
	}
	const callers = 5
	var wg sync.WaitGroup
	got := make([]int, callers)
	seen := make([]atomic.Int32, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := g.do(context.Background(), "k", func(Progress) { seen[i].Add(1) }, fn)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	// Wait until every caller has joined (the first one's "step" event is
	// replayed to the later ones), then let the run finish.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		for i := range seen {
			if seen[i].Load() > 0 {
				n++
			}
		}
		if n == callers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d callers saw progress", n, callers)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}
	for i := range callers {
		if got[i] != 42 || seen[i].Load() != 2 {
			t.Errorf("caller %d: got %d after %d events, want 42 after 2", i, got[i], seen[i].Load())
		}
	}
}

func TestGroupCancel(t *testing.T) {
	var g group[int]
	started := make(chan struct{})
	stopped := make(chan error, 1)
	fn := func(ctx context.Context, p ProgressFunc) (int, error) {
		p(Progress{Phase: PhaseBuild, Item: "running"})
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return 0, ctx.Err()
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { _, err := g.do(ctx1, "k", nil, fn); errs <- err }()
	<-started
	joined := make(chan struct{})
	var once sync.Once
	go func() {
		// The replayed event tells that the second caller has joined.
		_, err := g.do(ctx2, "k", func(Progress) { once.Do(func() { close(joined) }) }, fn)
		errs <- err
	}()
	<-joined

	cancel1()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("first caller: %v, want context.Canceled", err)
	}
	select {
	case <-stopped:
		t.Fatal("operation cancelled while a caller still waits for it")
	case <-time.After(50 * time.Millisecond):
	}
	cancel2()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("second caller: %v, want context.Canceled", err)
	}
	// The last caller returns only after the operation has stopped.
	select {
	case <-stopped:
	default:
		t.Fatal("last caller returned before the operation stopped")
	}
}
