// Package prepull fetches images before sandboxes need them: the
// LiteBoxd prepull API.
//
// A Service records each request as a task (store.Prepulls) and runs the
// image store's Ensure for it in the background. The image store shares
// one pull or build per reference among all its callers, so a sandbox
// created while its image is being prepulled waits for that same pull,
// and deleting a task cancels the pull only when nobody else waits for
// it. A task goes pending (recorded, no progress yet) → pulling (the
// image store reports progress) → completed or failed; a pull error, a
// timeout or a daemon restart fails it, with the reason in its Error.
//
// There is at most one active (pending or pulling) task per normalized
// image: "python" and "docker.io/library/python:latest" are one image.
// Tasks keep the image string as the client gave it.
//
// Where the runtime's nodes pull images themselves (the kubernetes
// runtime), the daemon gives the Service NodeImages instead of the image
// store: every node pulls (a DaemonSet), and progress counts nodes.
package prepull

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/store"
)

// Timeouts of a task's pull.
const (
	DefaultTimeout = 600 * time.Second
	// MaxTimeout caps a requested timeout rather than refusing it:
	// LiteBoxd accepts (and ignores) any value.
	MaxTimeout = 24 * time.Hour
)

// Reasons recorded on tasks the service itself failed.
const (
	ReasonRestarted = "daemon restarted"
	ReasonShutdown  = "daemon shutting down"
)

// Log attribute keys.
const (
	logTask  = "prepull"
	logImage = "image"
)

// Images is what the service needs of the image store. Ensure must share
// one operation per reference among concurrent callers and cancel it only
// when the last of them gives up, as image.Store's does.
type Images interface {
	Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error)
}

// TemplateResolver finds a template's spec: version 0 is the latest. It
// returns the spec and its version number; an unknown template is an
// errdefs.ErrNotFound (with the wire code the resolver chooses).
type TemplateResolver interface {
	Resolve(ctx context.Context, name string, version int) (api.TemplateSpec, int, error)
}

// TemplateResolverFunc is a func that is a TemplateResolver. The template
// service takes this service as its prepuller, so it is built later: a
// func that finds it when called lets this service take it at New.
type TemplateResolverFunc func(ctx context.Context, name string, version int) (api.TemplateSpec, int, error)

// Resolve calls f.
func (f TemplateResolverFunc) Resolve(ctx context.Context, name string, version int) (api.TemplateSpec, int, error) {
	return f(ctx, name, version)
}

// Service runs prepull tasks. It is safe for concurrent use. Create it
// with New, call Recover before serving, and Close it before closing the
// store.
type Service struct {
	store     store.Prepulls
	images    Images
	templates TemplateResolver // nil: ForTemplate is not implemented
	log       *slog.Logger

	mu     sync.Mutex
	active map[string]*run // by task id
	closed bool
	wg     sync.WaitGroup
}

// run is a task's background pull.
type run struct {
	id      string
	image   string // normalized
	timeout time.Duration
	cancel  context.CancelCauseFunc
	done    chan struct{}
}

// Causes of a run's cancellation, told apart when it ends.
var (
	errDeleted  = errors.New("prepull task deleted")
	errClosed   = errors.New(ReasonShutdown)
	errTimedOut = errors.New("prepull timed out")
)

// Option configures a Service.
type Option func(*Service)

// WithTemplates sets the resolver ForTemplate uses.
func WithTemplates(r TemplateResolver) Option { return func(s *Service) { s.templates = r } }

// New returns a Service that records tasks in st and fetches images with
// images.
func New(st store.Prepulls, images Images, log *slog.Logger, opts ...Option) *Service {
	if log == nil {
		log = slog.Default()
	}
	s := &Service{store: st, images: images, log: log, active: map[string]*run{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func notFound(id string) error {
	return errdefs.WithCode(errdefs.NotFound("Prepull task '%s' not found", id), api.CodePrepullNotFound)
}

// Start records a prepull task for ref and starts fetching the image in
// the background; template names the template it is for, if any. A
// timeout of 0 means DefaultTimeout; larger ones than MaxTimeout are
// capped. It returns the new task (pending), an ErrInvalidArgument for a
// bad reference or timeout, or an ErrAlreadyExists (PREPULL_IN_PROGRESS)
// when a task for the same image is still active.
func (s *Service) Start(ctx context.Context, ref, template string, timeout time.Duration) (*api.PrepullTask, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return nil, errdefs.Invalid("image is required")
	}
	norm, err := image.Normalize(ref)
	if err != nil {
		return nil, err
	}
	switch {
	case timeout < 0:
		return nil, errdefs.Invalid("timeout must not be negative")
	case timeout == 0:
		timeout = DefaultTimeout
	case timeout > MaxTimeout:
		timeout = MaxTimeout
	}

	// The lock spans the check and the insert, so that two requests for
	// one image cannot both pass the check.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("prepull %s: %w", ref, errdefs.ErrUnavailable)
	}
	for _, r := range s.active {
		if r.image == norm {
			return nil, errdefs.WithCode(
				errdefs.Conflict("prepull already in progress for image '%s' (id: %s)", ref, r.id),
				api.CodePrepullInProgress)
		}
	}
	rec := &store.Prepull{Image: ref, Template: template, Status: api.PrepullPending,
		StartedAt: time.Now().UTC().Truncate(time.Microsecond)}
	// Ids have 32 random bits: a clash is rare but possible.
	for attempt := 0; ; attempt++ {
		rec.ID = newID()
		err = s.store.CreatePrepull(ctx, rec)
		if !errors.Is(err, errdefs.ErrAlreadyExists) || attempt == 3 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("record prepull of %s: %w", ref, err)
	}

	// The pull outlives the request that started it.
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r := &run{id: rec.ID, image: norm, timeout: timeout, cancel: cancel, done: make(chan struct{})}
	s.active[r.id] = r
	s.wg.Add(1)
	go s.pull(runCtx, r)
	s.log.Info("prepull started", logTask, r.id, logImage, norm, "timeout", timeout)
	return toAPI(rec), nil
}

// Create starts a task for req, the body of POST /images/prepull, as Start
// does: the timeout is in seconds, and a huge one is capped before it
// becomes a time.Duration, which it would overflow.
func (s *Service) Create(ctx context.Context, req api.PrepullRequest) (*api.PrepullTask, error) {
	if req.Timeout < 0 {
		return nil, errdefs.Invalid("timeout must not be negative")
	}
	secs := min(req.Timeout, int(MaxTimeout/time.Second))
	return s.Start(ctx, req.Image, "", time.Duration(secs)*time.Second)
}

// Prepull starts a task with the default timeout and returns its id: the
// template service's Prepuller.
func (s *Service) Prepull(ctx context.Context, ref, template string) (string, error) {
	t, err := s.Start(ctx, ref, template, 0)
	if err != nil {
		return "", err
	}
	return t.ID, nil
}

// ForTemplate starts a task for the image of the latest version of the
// template named name.
func (s *Service) ForTemplate(ctx context.Context, name string) (*api.PrepullTask, error) {
	if s.templates == nil {
		return nil, fmt.Errorf("prepull for template %s: templates are not served: %w", name, errdefs.ErrNotImplemented)
	}
	spec, _, err := s.templates.Resolve(ctx, name, 0)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(spec.Image) == "" {
		return nil, errdefs.Invalid("Template has no image configured")
	}
	return s.Start(ctx, spec.Image, name, 0)
}

// Get returns the task id, or an ErrNotFound (PREPULL_NOT_FOUND).
func (s *Service) Get(ctx context.Context, id string) (*api.PrepullTask, error) {
	rec, err := s.store.GetPrepull(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, err
	}
	return toAPI(rec), nil
}

// statuses are the statuses a task has, in the order of its life.
var statuses = []string{api.PrepullPending, api.PrepullPulling, api.PrepullCompleted, api.PrepullFailed}

// List returns the tasks for ref (any spelling of the image; "" for all)
// with status ("" for all), newest first. It is never nil. A status that
// is none of a task's is ErrInvalidArgument, naming those.
func (s *Service) List(ctx context.Context, ref, status string) ([]api.PrepullTask, error) {
	if status != "" && !slices.Contains(statuses, status) {
		return nil, errdefs.Invalid("status %q: want one of %s", status, strings.Join(statuses, ", "))
	}
	var norm string
	if ref = strings.TrimSpace(ref); ref != "" {
		var err error
		if norm, err = image.Normalize(ref); err != nil {
			// No task has an invalid image.
			return []api.PrepullTask{}, nil
		}
	}
	recs, err := s.store.ListPrepulls(ctx, store.PrepullFilter{Status: status})
	if err != nil {
		return nil, err
	}
	out := make([]api.PrepullTask, 0, len(recs))
	for _, rec := range recs {
		if norm != "" {
			if n, err := image.Normalize(rec.Image); err != nil || n != norm {
				continue
			}
		}
		out = append(out, *toAPI(rec))
	}
	return out, nil
}

// Delete removes the task id, first cancelling its pull if it is active.
// The image store stops the pull itself only if no one else (a sandbox
// being created, another pull) waits for it. It returns an ErrNotFound
// (PREPULL_NOT_FOUND) for an unknown id.
func (s *Service) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	r := s.active[id]
	s.mu.Unlock()
	if r != nil {
		r.cancel(errDeleted)
		// Wait for the run so that it writes nothing after the delete.
		// A run whose write lands anyway finds no record and gives up.
		select {
		case <-r.done:
		case <-ctx.Done():
		}
	}
	err := s.store.DeletePrepull(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return notFound(id)
	}
	return err
}

// Recover fails the tasks a previous daemon left active: their pulls died
// with it. Call it once at start, before Start.
func (s *Service) Recover(ctx context.Context) error {
	recs, err := s.store.ListPrepulls(ctx, store.PrepullFilter{})
	if err != nil {
		return fmt.Errorf("recover prepull tasks: %w", err)
	}
	for _, rec := range recs {
		if !active(rec.Status) {
			continue
		}
		s.mu.Lock()
		_, ours := s.active[rec.ID]
		s.mu.Unlock()
		if ours {
			continue
		}
		_, err := s.store.UpdatePrepull(ctx, rec.ID, func(p *store.Prepull) error {
			if active(p.Status) {
				fail(p, ReasonRestarted)
			}
			return nil
		})
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("recover prepull task %s: %w", rec.ID, err)
		}
		s.log.Info("prepull task failed by restart", logTask, rec.ID, logImage, rec.Image)
	}
	return nil
}

// Close cancels the pulls in flight, records their tasks as failed
// (ReasonShutdown) and waits for them. Later Starts fail with
// ErrUnavailable. Close may be called more than once.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	for _, r := range s.active {
		r.cancel(errClosed)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// pull runs r until its image is stored, it fails, it times out or it is
// cancelled, and records each change of its task.
func (s *Service) pull(ctx context.Context, r *run) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.active, r.id)
		s.mu.Unlock()
		close(r.done)
	}()
	ctx, cancel := context.WithTimeoutCause(ctx, r.timeout, errTimedOut)
	defer cancel()

	// Progress arrives on the image store's goroutine, which must not be
	// held up: it only marks a change, and this goroutine records it.
	var tr tracker
	changed := make(chan struct{}, 1)
	progress := func(ev image.Progress) {
		if tr.observe(ev) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	result := make(chan error, 1)
	go func() {
		_, err := s.images.Ensure(ctx, r.image, progress)
		result <- err
	}()
	for {
		select {
		case <-changed:
			ready, total := tr.progress()
			s.record(r, func(p *store.Prepull) {
				p.Status, p.Ready, p.Total = api.PrepullPulling, ready, total
			})
		case err := <-result:
			s.finish(ctx, r, &tr, err)
			return
		}
	}
}

// finish records how r ended.
func (s *Service) finish(ctx context.Context, r *run, tr *tracker, err error) {
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		ready, total := tr.completed()
		s.record(r, func(p *store.Prepull) {
			now := time.Now().UTC()
			p.Status, p.Ready, p.Total, p.Error, p.CompletedAt = api.PrepullCompleted, ready, total, "", &now
		})
		s.log.Info("prepull completed", logTask, r.id, logImage, r.image)
	case errors.Is(cause, errDeleted):
		// Delete removes the record next, unless its request ends first:
		// then the task stays, ended rather than pending for ever.
		s.record(r, func(p *store.Prepull) { fail(p, errDeleted.Error()) })
		s.log.Info("prepull cancelled", logTask, r.id, logImage, r.image)
	default:
		msg := err.Error()
		switch {
		case errors.Is(cause, errTimedOut):
			msg = fmt.Sprintf("prepull timed out after %s", r.timeout)
		case errors.Is(cause, errClosed):
			msg = ReasonShutdown
		}
		s.record(r, func(p *store.Prepull) { fail(p, msg) })
		s.log.Warn("prepull failed", logTask, r.id, logImage, r.image, "err", msg)
	}
}

// record applies fn to r's task unless the task has ended. A record that
// is gone (deleted meanwhile) is not an error; others are logged, since
// no caller waits for a background pull.
func (s *Service) record(r *run, fn func(*store.Prepull)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.store.UpdatePrepull(ctx, r.id, func(p *store.Prepull) error {
		if active(p.Status) {
			fn(p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Error("record prepull task", logTask, r.id, "err", err)
	}
}

func active(status string) bool {
	return status == api.PrepullPending || status == api.PrepullPulling
}

func fail(p *store.Prepull, msg string) {
	now := time.Now().UTC()
	p.Status, p.Error, p.CompletedAt = api.PrepullFailed, msg, &now
}

func newID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return "pp-" + hex.EncodeToString(b)
}

func toAPI(p *store.Prepull) *api.PrepullTask {
	return &api.PrepullTask{
		ID: p.ID, Image: p.Image, Status: p.Status, Template: p.Template, Error: p.Error,
		Progress:  api.PrepullProgress{Ready: p.Ready, Total: p.Total},
		StartedAt: p.StartedAt, CompletedAt: p.CompletedAt,
	}
}
