// Package prepulltest is a fake image store for tests of prepull tasks:
// Ensure reports progress and, for references a test holds, blocks until
// the test lets the pull end.
package prepulltest

import (
	"context"
	"strings"
	"sync"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
)

// Images is a fake prepull.Images. Ensure of a reference the test holds
// (Hold) blocks; of a reference containing "missing" fails with an
// ErrNotFound; of any other reference "pulls" one layer at once. Safe
// for concurrent use.
type Images struct {
	mu     sync.Mutex
	holds  map[string]*Pull
	stored map[string]bool
	calls  int
}

// NewImages returns an empty fake store.
func NewImages() *Images {
	return &Images{holds: map[string]*Pull{}, stored: map[string]bool{}}
}

// Pull is a held pull: one Ensure call at a time runs it.
type Pull struct {
	events    chan image.Progress
	acked     chan struct{}
	finish    chan error
	started   chan struct{}
	cancelled chan struct{}
	ended     chan struct{}
	once      [3]sync.Once
}

// Hold makes Ensure of ref (any spelling) block until the returned Pull
// is finished or Ensure's context ends.
func (f *Images) Hold(ref string) *Pull {
	if n, err := image.Normalize(ref); err == nil {
		ref = n
	}
	p := &Pull{
		events: make(chan image.Progress), acked: make(chan struct{}), finish: make(chan error),
		started: make(chan struct{}), cancelled: make(chan struct{}), ended: make(chan struct{}),
	}
	f.mu.Lock()
	f.holds[ref] = p
	f.mu.Unlock()
	return p
}

// Stored reports whether ref has been "pulled".
func (f *Images) Stored(ref string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stored[ref]
}

// Calls returns how many times Ensure was called.
func (f *Images) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Ensure implements prepull.Images.
func (f *Images) Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	report := func(ev image.Progress) {
		if p != nil {
			p(ev)
		}
	}
	f.mu.Lock()
	f.calls++
	hold, stored := f.holds[ref], f.stored[ref]
	f.mu.Unlock()
	img := &image.Image{Ref: ref, ID: "sha256:fake", Digest: "sha256:fake"}
	switch {
	case strings.Contains(ref, "missing"):
		return nil, errdefs.WithCode(errdefs.NotFound("image %s not found", ref), api.CodeImageNotFound)
	case stored:
		report(image.Progress{Phase: image.PhaseDone, Item: ref})
		return img, nil
	case hold == nil:
		report(image.Progress{Phase: image.PhaseResolve, Item: ref})
		report(image.Progress{Phase: image.PhaseDownload, Item: "sha256:l1", Current: 10, Total: 10})
		report(image.Progress{Phase: image.PhaseUnpack, Item: "sha256:l1", Current: 10, Total: 10})
		f.store(ref)
		report(image.Progress{Phase: image.PhaseDone, Item: ref})
		return img, nil
	}
	hold.once[0].Do(func() { close(hold.started) })
	defer hold.once[2].Do(func() { close(hold.ended) })
	for {
		select {
		case ev := <-hold.events:
			report(ev)
			hold.acked <- struct{}{}
		case err := <-hold.finish:
			if err != nil {
				return nil, err
			}
			f.store(ref)
			report(image.Progress{Phase: image.PhaseDone, Item: ref})
			return img, nil
		case <-ctx.Done():
			hold.once[1].Do(func() { close(hold.cancelled) })
			return nil, ctx.Err()
		}
	}
}

func (f *Images) store(ref string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stored[ref] = true
	delete(f.holds, ref)
}

// Started is closed once Ensure runs the pull.
func (p *Pull) Started() <-chan struct{} { return p.started }

// Cancelled is closed once Ensure gave up because its context ended.
func (p *Pull) Cancelled() <-chan struct{} { return p.cancelled }

// Emit hands ev to the running Ensure's progress function and returns
// once that returned. It returns false if Ensure has ended.
func (p *Pull) Emit(ev image.Progress) bool {
	select {
	case p.events <- ev:
		<-p.acked
		return true
	case <-p.ended:
		return false
	}
}

// Finish ends the pull: with err, or stores the image if err is nil. It
// returns false if Ensure has ended already.
func (p *Pull) Finish(err error) bool {
	select {
	case p.finish <- err:
		return true
	case <-p.ended:
		return false
	}
}
