package image

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Ensurer is what Prebuild needs of a Store.
type Ensurer interface {
	Get(ctx context.Context, ref string) (*Image, error)
	Ensure(ctx context.Context, ref string, p ProgressFunc) (*Image, error)
}

var _ Ensurer = (*Store)(nil)

// DefaultPrebuildLogInterval is how often a prebuild logs the progress of a
// build within one phase; a new phase is logged at once.
const DefaultPrebuildLogInterval = 15 * time.Second

// Prebuild builds, one after the other, the built-in images a daemon's
// defaults use that are not stored yet, so that the first request for one
// finds it stored or joins its build (the store shares one operation per
// ref) instead of starting from nothing. Refs that are not built-in names
// are left to whoever needs them.
//
// Its Run is a loop for a supervisor; a Prebuild is not safe for
// concurrent Runs.
type Prebuild struct {
	images Ensurer
	refs   func(ctx context.Context) []string
	log    *slog.Logger
	every  time.Duration // between progress logs within one phase
	now    func() time.Time
}

// NewPrebuild returns the prebuild of the refs that refs returns when Run
// starts, in that order, into images.
func NewPrebuild(images Ensurer, refs func(ctx context.Context) []string, log *slog.Logger) *Prebuild {
	if log == nil {
		log = slog.Default()
	}
	return &Prebuild{images: images, refs: refs, log: log, every: DefaultPrebuildLogInterval, now: time.Now}
}

// Run builds each missing image in turn, logging its progress, then waits
// for ctx to end. A build that fails is logged and the next one is tried;
// Run then returns their errors, for its supervisor to run it again after
// a back-off (a mirror that was out of reach may be back). Ending ctx stops
// the build in progress, unless a request waits for it too: the store's
// operation outlives the prebuild then.
func (b *Prebuild) Run(ctx context.Context) error {
	var errs []error
	seen := map[string]bool{}
	for _, ref := range b.refs(ctx) {
		key, err := Normalize(ref)
		if err != nil || seen[key] || !IsBuiltin(key) {
			continue
		}
		seen[key] = true
		if _, err := b.images.Get(ctx, key); err == nil {
			b.log.Debug("built-in image already stored", logRef, key)
			continue
		}
		if err := b.build(ctx, key); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	<-ctx.Done()
	return ctx.Err()
}

// build ensures ref, logging its start, its progress and how it ended.
func (b *Prebuild) build(ctx context.Context, ref string) error {
	start := b.now()
	b.log.Info("building image in the background", logRef, ref)
	pl := &buildLog{log: b.log, ref: ref, start: start, every: b.every, now: b.now}
	_, err := b.images.Ensure(ctx, ref, pl.update)
	took := b.now().Sub(start).Round(time.Second)
	switch {
	case ctx.Err() != nil:
		b.log.Info("background image build stopped", logRef, ref, "after", took)
	case err != nil:
		b.log.Error("background image build failed", logRef, ref, "after", took, "err", err)
		return fmt.Errorf("build image %s: %w", ref, err)
	default:
		b.log.Info("built image", logRef, ref, "took", took)
	}
	return err
}

// buildLog logs a build's progress: each new phase, and within one at
// most every interval.
type buildLog struct {
	log   *slog.Logger
	ref   string
	start time.Time
	every time.Duration
	now   func() time.Time

	phase string
	last  time.Time
}

func (l *buildLog) update(ev Progress) {
	now := l.now()
	if ev.Phase == l.phase && now.Sub(l.last) < l.every {
		return
	}
	l.phase, l.last = ev.Phase, now
	attrs := []any{logRef, l.ref, "phase", ev.Phase, "elapsed", now.Sub(l.start).Round(time.Second)}
	if ev.Item != "" {
		attrs = append(attrs, "item", ev.Item)
	}
	if ev.Current > 0 {
		attrs = append(attrs, "bytes", ev.Current)
	}
	if ev.Total > 0 {
		attrs = append(attrs, "total", ev.Total, "percent", min(100, ev.Current*100/ev.Total))
	}
	l.log.Info("building image", attrs...)
}
