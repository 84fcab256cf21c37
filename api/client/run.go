package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
)

// RunService holds the task run endpoints: tasks submitted to the daemon,
// run by agents in sandboxes. Use it as Client.Runs().
type RunService struct {
	c *Client
}

// Runs returns the task run endpoints.
func (c *Client) Runs() *RunService { return &RunService{c: c} }

// runPath returns the escaped API path of run id, with suffix.
func runPath(id, suffix string) (string, error) {
	if id == "" {
		return "", invalidf("run id is empty")
	}
	return "/runs/" + url.PathEscape(id) + suffix, nil
}

// Submit submits a task (req.Task, a task file's content, or
// req.TaskName) and returns its runs, queued. A task that does not load
// is ErrInvalidArgument with the daemon's message naming the field.
func (s *RunService) Submit(ctx context.Context, req api.RunSubmitRequest) (*api.RunBatch, error) {
	var b api.RunBatch
	if err := s.c.doJSON(ctx, http.MethodPost, "/runs", req, &b); err != nil {
		return nil, wrapf(err, "submit task")
	}
	return &b, nil
}

// ListRunsOptions selects runs.
type ListRunsOptions struct {
	// Batch selects one submission's runs.
	Batch string
	// Statuses, when not empty, selects the runs in one of them.
	Statuses []api.RunStatus
	// Agents, when not empty, selects the runs of one of them (an agent
	// the daemon does not know is ErrInvalidArgument); Models those of
	// one of these models, by the name the run records.
	Agents, Models []string
	// Limit and Cursor ask for one page (Limit 0: every run).
	Limit  int
	Cursor string
	// Order is the list's order: "" (the daemon's default) or
	// api.OrderAsc oldest first, api.OrderDesc newest first.
	Order api.Order
}

// List returns the runs opts selects, oldest first unless opts.Order says
// otherwise.
func (s *RunService) List(ctx context.Context, opts ListRunsOptions) (*api.RunList, error) {
	q := pageQuery(opts.Limit, opts.Cursor, opts.Order)
	if opts.Batch != "" {
		q.Set("batch", opts.Batch)
	}
	for _, st := range opts.Statuses {
		q.Add("status", string(st))
	}
	for _, a := range opts.Agents {
		q.Add("agent", a)
	}
	for _, m := range opts.Models {
		q.Add("model", m)
	}
	var out api.RunList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, "/runs", q, nil, &out); err != nil {
		return nil, wrapf(err, "list runs")
	}
	return &out, nil
}

// Get returns run id.
func (s *RunService) Get(ctx context.Context, id string) (*api.Run, error) {
	p, err := runPath(id, "")
	if err != nil {
		return nil, wrapf(err, "get run")
	}
	var r api.Run
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, &r); err != nil {
		return nil, wrapf(err, "get run %s", id)
	}
	return &r, nil
}

// Cancel cancels run id; a running run ends shortly after.
func (s *RunService) Cancel(ctx context.Context, id string) (*api.Run, error) {
	p, err := runPath(id, "/cancel")
	if err != nil {
		return nil, wrapf(err, "cancel run")
	}
	var r api.Run
	if err := s.c.doJSON(ctx, http.MethodPost, p, nil, &r); err != nil {
		return nil, wrapf(err, "cancel run %s", id)
	}
	return &r, nil
}

// Delete deletes ended run id with its logs and artifacts; a run not
// ended is ErrConflict.
func (s *RunService) Delete(ctx context.Context, id string) error {
	p, err := runPath(id, "")
	if err != nil {
		return wrapf(err, "delete run")
	}
	if err := s.c.doJSON(ctx, http.MethodDelete, p, nil, nil); err != nil {
		return wrapf(err, "delete run %s", id)
	}
	return nil
}

// Events passes each event of run id to fn, from the run's start, until
// its end event (passed too), ctx ends or fn fails; see EventsAfter.
func (s *RunService) Events(ctx context.Context, id string, fn func(api.RunEvent) error) error {
	return s.EventsAfter(ctx, id, 0, fn)
}

// EventsAfter passes each event of run id numbered after after (its Seq;
// 0: from the run's start) to fn, until its end event (passed too), ctx
// ends or fn fails: the daemon starts the stream after it, so that a
// follow that broke resumes with the last Seq it got, missing nothing and
// getting nothing twice. After the end event's Seq it returns nil with
// nothing passed. A stream that ends before the run has (the daemon
// stopped, the connection broke) is an error; a negative after is
// ErrInvalidArgument.
func (s *RunService) EventsAfter(ctx context.Context, id string, after int64, fn func(api.RunEvent) error) error {
	p, err := runPath(id, "/events")
	if err == nil && after < 0 {
		err = invalidf("after %d: want the seq of an event, 0 or more", after)
	}
	if err != nil {
		return wrapf(err, "follow run")
	}
	var q url.Values
	if after > 0 {
		q = url.Values{"after": {strconv.FormatInt(after, 10)}}
	}
	resp, err := s.c.send(ctx, http.MethodGet, apiPrefix+p, q, nil, "")
	if err != nil {
		return wrapf(err, "follow run %s", id)
	}
	defer resp.Body.Close()
	events := sse.NewReader(resp.Body)
	for {
		ev, err := events.Next()
		if errors.Is(err, io.EOF) {
			return s.streamEnded(ctx, id)
		}
		if err != nil {
			return wrapf(err, "follow run %s", id)
		}
		switch ev.Name {
		case "event":
			var re api.RunEvent
			if err := json.Unmarshal(ev.Data, &re); err != nil {
				return wrapf(err, "decode run event")
			}
			if err := fn(re); err != nil {
				return err
			}
			if re.Type == api.RunEventEnd {
				return nil
			}
		case "error":
			return wrapf(streamError(ev.Data), "follow run %s", id)
		}
	}
}

// streamEnded is the error of run id's event stream that ended without
// the run's end event: none when the run has ended (a log a killed daemon
// left has no end event), else that the stream broke.
func (s *RunService) streamEnded(ctx context.Context, id string) error {
	if r, err := s.Get(ctx, id); err == nil && r.Status.Final() {
		return nil
	}
	return fmt.Errorf("follow run %s: the event stream ended before the run did (the daemon stopped, or the connection broke)", id)
}

// Logs opens run id's output (stderr lines marked "[stderr] "); the
// caller closes it.
func (s *RunService) Logs(ctx context.Context, id string) (io.ReadCloser, error) {
	return s.open(ctx, id, "/logs", "get the output of run")
}

// Artifacts opens run id's artifacts as a tar archive (each by its path
// in the sandbox without the leading "/"); the caller closes it.
func (s *RunService) Artifacts(ctx context.Context, id string) (io.ReadCloser, error) {
	return s.open(ctx, id, "/artifacts", "get the artifacts of run")
}

// Artifact opens the artifact of run id at p, its absolute path in the
// sandbox; the caller closes it.
func (s *RunService) Artifact(ctx context.Context, id, p string) (io.ReadCloser, error) {
	var segs []string
	for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		segs = append(segs, url.PathEscape(seg))
	}
	return s.open(ctx, id, "/artifacts/"+strings.Join(segs, "/"), "get artifact "+p+" of run")
}

func (s *RunService) open(ctx context.Context, id, suffix, doing string) (io.ReadCloser, error) {
	p, err := runPath(id, suffix)
	if err != nil {
		return nil, wrapf(err, "%s", doing)
	}
	resp, err := s.c.send(ctx, http.MethodGet, apiPrefix+p, nil, nil, "")
	if err != nil {
		return nil, wrapf(err, "%s %s", doing, id)
	}
	return resp.Body, nil
}

// Wait polls run id until it ended and returns it; pollInterval <= 0
// means DefaultPollInterval. Bound the wait with ctx.
func (s *RunService) Wait(ctx context.Context, id string, pollInterval time.Duration) (*api.Run, error) {
	if pollInterval <= 0 {
		pollInterval = DefaultPollInterval
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		r, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if r.Status.Final() {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("wait for run %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}
