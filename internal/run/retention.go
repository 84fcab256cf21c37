package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// Removing runs: a run's record is the store's, its files (<Dir>/<id>/)
// are on the daemons that wrote them: the one that carried it out, and
// one that ended it after that one died. So a run is removed record
// first, and then the files of this daemon: once the record is gone no
// request reads the files, and the files another daemon (or a failed
// removal here) left are removed by RemoveOrphans, which every daemon
// runs over its own directory. Retention (Expire) acts on every daemon's
// records: one daemon of the store runs it (the daemon's leader), and two
// that run it at once (a leadership changing hands) at worst both try to
// delete a run, one of them finding it gone.

// DefaultRetentionInterval is how often the daemon removes the runs past
// Config.MaxAge and the files of runs removed elsewhere.
const DefaultRetentionInterval = 10 * time.Minute

// retentionPage is how many expired runs Expire reads at a time.
const retentionPage = 100

// runPrefix starts every run's id, and so the name of its directory.
const runPrefix = "run-"

// Delete removes ended run id, its record and then its files; a run not
// ended is ErrFailedPrecondition (cancel it first); another tenant's is
// ErrNotFound. A failure leaves the run as it was, but for files left
// after its record went, which RemoveOrphans removes.
func (s *Service) Delete(ctx context.Context, id string) error {
	r, err := s.get(ctx, id)
	if err != nil {
		return err
	}
	// An ended run never becomes active again: the check holds until the
	// delete.
	if !final(r.Status) {
		return errdefs.Precondition("run %s is %s: cancel it first", id, r.Status)
	}
	return s.remove(ctx, id)
}

// remove deletes the record of ended run id, then its files here.
func (s *Service) remove(ctx context.Context, id string) error {
	if err := s.store.DeleteRun(ctx, id); err != nil {
		return runErr(err, id)
	}
	if err := os.RemoveAll(s.runDir(id)); err != nil {
		s.log.Warn("remove the files of a deleted run", logRun, id, "err", err)
	}
	return nil
}

// Expire removes the runs, of every tenant, that ended more than
// Config.MaxAge ago (none when it is 0): their records, and their files
// here. It returns how many it removed; a run removed meanwhile by
// another is not counted.
func (s *Service) Expire(ctx context.Context) (int, error) {
	if s.cfg.MaxAge <= 0 {
		return 0, nil
	}
	f := store.RunFilter{EndedBefore: s.now().Add(-s.cfg.MaxAge)}
	p := store.Page{Limit: retentionPage}
	n := 0
	for {
		recs, next, err := s.store.ListRunPage(ctx, f, p)
		if err != nil {
			return n, fmt.Errorf("list the runs past their retention: %w", err)
		}
		for _, r := range recs {
			switch err := s.remove(ctx, r.ID); {
			case err == nil:
				n++
			case !errors.Is(err, errdefs.ErrNotFound):
				return n, fmt.Errorf("remove run %s past its retention: %w", r.ID, err)
			}
		}
		if next == "" {
			return n, nil
		}
		p.After = next
	}
}

// RemoveOrphans removes this daemon's files of runs that have no record
// any more (removed by another daemon, or whose files a removal here
// failed to remove) and returns how many runs' files it removed. A run
// has its record from before this daemon writes any of its files, so a
// run's directory without a record is one left behind.
func (s *Service) RemoveOrphans(ctx context.Context) (int, error) {
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return 0, fmt.Errorf("read the runs directory: %w", err)
	}
	n := 0
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !strings.HasPrefix(id, runPrefix) {
			continue
		}
		switch _, err := s.store.GetRun(ctx, id); {
		case err == nil:
			continue
		case !errors.Is(err, errdefs.ErrNotFound):
			return n, fmt.Errorf("look up run %s: %w", id, err)
		}
		if err := os.RemoveAll(s.runDir(id)); err != nil {
			return n, fmt.Errorf("remove the files of removed run %s: %w", id, err)
		}
		n++
	}
	return n, nil
}

// RunRetention runs sweep (Expire, RemoveOrphans) now and then every
// interval until ctx ends, logging what it removed and its failures,
// which the next sweep retries. It returns nil when ctx ends.
func (s *Service) RunRetention(ctx context.Context, interval time.Duration, sweep func(context.Context) (int, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := sweep(ctx)
		if n > 0 {
			s.log.Info("task runs removed", "runs", n)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("task run retention", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
