package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/agent2env/agent2env/api"
)

// PrepullService holds the image prepull endpoints: tasks that fetch an
// image before sandboxes need it. Use it as Client.Prepull.
type PrepullService struct {
	c *Client
}

// prepullPath returns the escaped API path of prepull task id.
func prepullPath(id string) (string, error) {
	if id == "" {
		return "", invalidf("prepull task id is empty")
	}
	return "/images/prepull/" + url.PathEscape(id), nil
}

// Create starts prepulling image and returns the new task, usually still
// pending. The pull fails once it has run for timeout, rounded up to whole
// seconds; 0 means the daemon's default (600 s). A task already active for
// the same image makes it fail with ErrConflict (PREPULL_IN_PROGRESS).
func (s *PrepullService) Create(ctx context.Context, image string, timeout time.Duration) (*api.PrepullTask, error) {
	if timeout < 0 {
		return nil, invalidf("prepull %s: timeout %v is negative", image, timeout)
	}
	secs := timeout / time.Second // rounded up without overflowing near the largest Duration
	if timeout%time.Second != 0 {
		secs++
	}
	req := api.PrepullRequest{Image: image, Timeout: int(secs)}
	var t api.PrepullTask
	if err := s.c.doJSON(ctx, http.MethodPost, "/images/prepull", req, &t); err != nil {
		return nil, wrapf(err, "prepull %s", image)
	}
	return &t, nil
}

// CreateForTemplate starts prepulling the image of the latest version of
// the template named name.
func (s *PrepullService) CreateForTemplate(ctx context.Context, name string) (*api.PrepullTask, error) {
	p, err := templatePath(name, "/prepull")
	if err != nil {
		return nil, wrapf(err, "prepull for template")
	}
	var t api.PrepullTask
	if err := s.c.doJSON(ctx, http.MethodPost, p, nil, &t); err != nil {
		return nil, wrapf(err, "prepull for template %s", name)
	}
	return &t, nil
}

// List returns the prepull tasks, newest first: those for image (any
// spelling of it: agent2env normalizes, LiteBoxd compares exactly) and
// with status (one of api.Prepull*), either "" for all.
func (s *PrepullService) List(ctx context.Context, image, status string) ([]api.PrepullTask, error) {
	l, err := s.ListPage(ctx, ListPrepullsOptions{Image: image, Status: status})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ListPrepullsOptions selects prepull tasks. The zero value selects every
// task, newest first.
type ListPrepullsOptions struct {
	// Image, when set, selects the tasks for this image (any spelling of
	// it: agent2env normalizes, LiteBoxd compares exactly).
	Image string
	// Status, when set, selects the tasks with this status (one of
	// api.Prepull*).
	Status string
	// Limit and Cursor ask for one page (Limit 0: every task; agent2env
	// additions); the next page's cursor is the list's NextCursor.
	Limit  int
	Cursor string
	// Order is the list's order: "" (the daemon's default, newest first),
	// api.OrderAsc oldest first or api.OrderDesc newest first.
	Order api.Order
}

// ListPage returns the prepull tasks opts selects, newest first unless
// opts.Order says otherwise: one page when opts.Limit is set.
func (s *PrepullService) ListPage(ctx context.Context, opts ListPrepullsOptions) (*api.PrepullList, error) {
	q := pageQuery(opts.Limit, opts.Cursor, opts.Order)
	if opts.Image != "" {
		q.Set("image", opts.Image)
	}
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	var l api.PrepullList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, "/images/prepull", q, nil, &l); err != nil {
		return nil, wrapf(err, "list prepull tasks")
	}
	return &l, nil
}

// Get returns one prepull task. (agent2env serves this route; LiteBoxd
// answers it with a plain 404.)
func (s *PrepullService) Get(ctx context.Context, id string) (*api.PrepullTask, error) {
	p, err := prepullPath(id)
	if err != nil {
		return nil, wrapf(err, "get prepull task")
	}
	var t api.PrepullTask
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &t); err != nil {
		return nil, wrapf(err, "get prepull task %s", id)
	}
	return &t, nil
}

// Delete removes a prepull task, cancelling its pull if it is active and
// nothing else waits for the image.
func (s *PrepullService) Delete(ctx context.Context, id string) error {
	p, err := prepullPath(id)
	if err == nil {
		err = s.c.doJSON(ctx, http.MethodDelete, p, nil, nil)
	}
	if err != nil {
		return wrapf(err, "delete prepull task %s", id)
	}
	return nil
}

// DefaultPrepullPollInterval is how often WaitForCompletion polls when
// given no interval: pulls take seconds to minutes.
const DefaultPrepullPollInterval = time.Second

// WaitForCompletion polls a prepull task until it is completed and
// returns it. When the task fails it returns the task and a
// *PrepullFailedError. pollInterval <= 0 means DefaultPrepullPollInterval.
// Bound the wait with ctx: when it ends first, the error wraps its cause
// (context.DeadlineExceeded for a timeout).
func (s *PrepullService) WaitForCompletion(ctx context.Context, id string, pollInterval time.Duration) (*api.PrepullTask, error) {
	if pollInterval <= 0 {
		pollInterval = DefaultPrepullPollInterval
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		task, err := s.Get(ctx, id)
		if err != nil {
			return nil, wrapf(err, "wait for prepull task %s", id)
		}
		switch task.Status {
		case api.PrepullCompleted:
			return task, nil
		case api.PrepullFailed:
			return task, &PrepullFailedError{TaskID: task.ID, Image: task.Image, Reason: task.Error}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for prepull task %s (status %s): %w", id, task.Status, context.Cause(ctx))
		case <-t.C:
		}
	}
}
