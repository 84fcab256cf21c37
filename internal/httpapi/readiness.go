package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// readyTimeout bounds each readiness check: a dependency slower than this
// counts as unreachable (a Kubernetes readiness probe's default timeout is
// 1 s, deploy/kubernetes sets 3 s).
const readyTimeout = 2 * time.Second

// ReadyCheck is one dependency /readyz checks on every request once the
// daemon has recovered: the store the daemon keeps its records in, the
// cluster its sandboxes run on. Check returns nil when the dependency
// answers.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// WithReadyChecks makes /readyz answer 503 while any of checks fails, so
// that a replica that lost its store or its cluster leaves its Service's
// endpoints until it has them back.
func WithReadyChecks(checks ...ReadyCheck) Option {
	return func(s *Server) { s.readyChecks = append(s.readyChecks, checks...) }
}

// readyz answers 200 "ready" when the daemon has recovered and every
// ReadyCheck passes, each within readyTimeout and all at once; else 503
// with what is not ready.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		writeError(w, fmt.Errorf("daemon is still recovering: %w", errdefs.ErrUnavailable))
		return
	}
	if err := s.checkReady(r.Context()); err != nil {
		s.log.Warn("not ready", "err", err)
		writeError(w, fmt.Errorf("not ready: %w: %w", errdefs.ErrUnavailable, err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ready")
}

// checkReady runs the ReadyChecks concurrently and joins their failures.
func (s *Server) checkReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	errs := make([]error, len(s.readyChecks))
	var wg sync.WaitGroup
	for i, c := range s.readyChecks {
		wg.Go(func() {
			if err := c.Check(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", c.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
