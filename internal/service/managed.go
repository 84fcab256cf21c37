package service

import (
	"context"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/manager"
)

// The operations below serve daemon services that drive sandboxes of
// their own (the task runner, package run) rather than clients: what such
// a service asks of a sandbox goes beyond the API's requests, and none of
// it is a route.

// ManagedRequest is a sandbox a daemon service makes for its own records.
type ManagedRequest struct {
	api.CreateSandboxRequest
	// Disk bounds the sandbox's writable storage ("2Gi"); empty: the
	// daemon's default. (The API's requests take a disk size from
	// templates only.)
	Disk string
	// ManagedBy names the service; its sandboxes are marked so
	// (manager.Config.KeepDeadFiles keeps the files of those that die for
	// services that collect from them).
	ManagedBy string
}

// CreateManaged makes a sandbox as Create does, for the service
// req.ManagedBy names; it is returned as Create returns it, usually
// pending (see WaitRunning).
func (s *Sandboxes) CreateManaged(ctx context.Context, req ManagedRequest) (*api.Sandbox, error) {
	mreq, err := req.create()
	if err != nil {
		return nil, err
	}
	return s.viewOf(s.m.Create(ctx, mreq))
}

// create is the manager's request of req.
func (req ManagedRequest) create() (manager.CreateRequest, error) {
	mreq, err := createRequest(req.CreateSandboxRequest)
	mreq.Disk, mreq.ManagedBy = req.Disk, req.ManagedBy
	return mreq, err
}

// CheckManaged refuses, making nothing, a request CreateManaged could never
// fulfil: an unknown template, an image that is not a reference, bad
// limits, or cpu or memory beyond the host's whole capacity
// (ErrInvalidArgument, where a create is 507). A service that queues work
// checks its sandbox when the work is submitted.
func (s *Sandboxes) CheckManaged(ctx context.Context, req ManagedRequest) error {
	mreq, err := req.create()
	if err != nil {
		return err
	}
	return s.m.Check(ctx, mreq)
}

// WaitRunning waits until sandbox id leaves pending: it returns the
// running sandbox, or an error saying why it is not running
// (ErrFailedPrecondition, SANDBOX_NOT_READY).
func (s *Sandboxes) WaitRunning(ctx context.Context, id string) (*api.Sandbox, error) {
	sb, err := s.m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.viewOf(s.m.WaitRunning(ctx, sb))
}

// CheckDead looks at running sandbox id's runtime side now and fails the
// sandbox if it has died, returning it as it then is. Clients see a
// sandbox that died once the manager's sweep notices (within a second); a
// service that must know at once whether to start one again (the runner,
// to collect the artifacts a dead sandbox kept) asks here.
func (s *Sandboxes) CheckDead(ctx context.Context, id string) (*api.Sandbox, error) {
	return s.viewOf(s.m.CheckDead(ctx, id))
}

// Ping checks that the agent of running sandbox id answers.
func (s *Sandboxes) Ping(ctx context.Context, id string) error {
	c, err := s.m.Agent(ctx, id)
	if err != nil {
		return err
	}
	if _, err := c.Info(ctx); err != nil {
		return fmt.Errorf("ping the agent of sandbox %s: %w", id, err)
	}
	return nil
}

// CPUTime returns the CPU time the processes of sandbox id have used, and
// false when the runtime does not measure it (or could not now).
func (s *Sandboxes) CPUTime(ctx context.Context, id string) (time.Duration, bool) {
	if s.usage == nil {
		return 0, false
	}
	u, err := s.usage.Usage(ctx, id)
	if err != nil {
		return 0, false
	}
	return time.Duration(u.CPUNanos), true
}
