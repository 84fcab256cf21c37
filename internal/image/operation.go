package image

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Operation is a pull or build of one ref: one in flight, or the last one
// that failed.
type Operation struct {
	// Ref is the normalized reference.
	Ref string
	// Build is set for a built-in image's build, clear for a pull.
	Build bool
	// Started is when the operation began.
	Started time.Time
	// Progress is the last progress it reported; zero before the first.
	Progress Progress
	// Err is set when the operation failed and no other runs on Ref since;
	// Ended is then when it failed.
	Err   error
	Ended time.Time
}

// failure is the end of an operation that failed.
type failure struct {
	started, ended time.Time
	last           Progress
	err            error
}

// Operations returns the pulls and builds in flight, and the last failed
// one of each ref that has none in flight and was not stored since,
// ordered by ref.
func (s *Store) Operations() []Operation {
	var out []Operation
	running := map[string]bool{}
	for _, f := range s.ops.running() {
		running[f.key] = true
		out = append(out, Operation{Ref: f.key, Build: isLocalKey(f.key), Started: f.started, Progress: f.latest})
	}
	s.mu.Lock()
	for ref, f := range s.failed {
		if _, stored := s.idx.Images[ref]; !stored && !running[ref] {
			out = append(out, Operation{Ref: ref, Build: isLocalKey(ref), Started: f.started, Progress: f.last, Err: f.err, Ended: f.ended})
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out
}

// isLocalKey reports whether a normalized ref is built here, not pulled.
func isLocalKey(key string) bool { return strings.HasPrefix(key, builtinNamespace) }

// do runs fn as the operation on key, or joins the one in flight (see
// group.do), and keeps its failure for Operations until the next success.
// An operation ended because nobody waits for it any more did not fail.
func (s *Store) do(ctx context.Context, key string, p ProgressFunc, fn func(context.Context, ProgressFunc) (*Image, error)) (*Image, error) {
	return s.ops.do(ctx, key, p, func(ctx context.Context, p ProgressFunc) (*Image, error) {
		started := time.Now()
		// Layers report from goroutines of their own.
		var lastMu sync.Mutex
		var last Progress
		img, err := fn(ctx, func(ev Progress) {
			lastMu.Lock()
			last = ev
			lastMu.Unlock()
			report(p, ev)
		})
		lastMu.Lock()
		defer lastMu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case err == nil:
			delete(s.failed, key)
		case ctx.Err() == nil && !errors.Is(err, context.Canceled):
			if s.failed == nil {
				s.failed = map[string]failure{}
			}
			s.failed[key] = failure{started: started, ended: time.Now(), last: last, err: err}
		}
		return img, err
	})
}

// Follow waits for the pull or build of ref in flight, passing its
// progress so far and as it goes to p, and returns the image it stored or
// its error. It starts nothing and stops nothing: ref stored with nothing
// in flight is returned at once, and ref neither stored nor in flight is
// an ErrNotFound. Ending ctx ends only the wait.
func (s *Store) Follow(ctx context.Context, ref string, p ProgressFunc) (*Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, fmt.Errorf("follow image %s: %w", ref, err)
	}
	if img, err, ok := s.ops.follow(ctx, r.key, p); ok {
		return img, err
	}
	img, err := s.get(r)
	if err != nil {
		return nil, errdefs.NotFound("image %s is not stored, and is not being pulled or built", r.key)
	}
	report(p, Progress{Phase: PhaseDone, Item: img.Ref})
	return img, nil
}

// Builtins returns the normalized references of the built-in images,
// sorted: those Build and Ensure make here from their recipes.
func Builtins() []string { return builtinNames() }

// IsBuiltin reports whether ref names a built-in image
// ("agent2env/code-interpreter", "agent2env/python:latest").
func IsBuiltin(ref string) bool {
	r, err := parseRef(ref)
	if err != nil {
		return false
	}
	_, ok := recipes[r.key]
	return ok
}
