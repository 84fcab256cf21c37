package manager

import (
	"context"
	"fmt"
	"io"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// ProcIO says how a background process takes input and gives output, for
// the clients that drive it interactively (E2B's envd protocol): a tag
// to name it by, a pseudo-terminal of Rows x Cols, or a stdin pipe.
type ProcIO struct {
	Tag        string
	TTY        bool
	Rows, Cols uint16
	Stdin      bool
	// FlowControl makes the output wait for the writer attachment
	// (AttachProc), from the start, rather than overwrite what it has not
	// read: the caller must attach next (or kill the process).
	FlowControl bool
	// OutputLimit is how many bytes of its latest output the agent keeps
	// for readers (agent.DefaultProcOutput when zero).
	OutputLimit int
}

// StartProcIO is StartProc with the input and output pio describes.
func (m *Manager) StartProcIO(ctx context.Context, id string, req ProcRequest, pio ProcIO) (agent.ProcInfo, error) {
	c, preq, err := m.procIO(ctx, id, req, pio)
	if err != nil {
		return agent.ProcInfo{}, err
	}
	info, err := c.StartProc(ctx, preq)
	if err != nil {
		return agent.ProcInfo{}, fmt.Errorf("start process in sandbox %s: %w", id, err)
	}
	return info, nil
}

// StartFollowProc is StartProcIO then a read of the process's output from
// its first byte to its end as its writer, in one exchange with the agent
// (agent.Client.StartFollowProc): started is called with the process
// before output gets any of its output.
func (m *Manager) StartFollowProc(ctx context.Context, id string, req ProcRequest, pio ProcIO, started func(agent.ProcInfo) error, output agent.OutputFunc) (agent.ProcOutputResult, error) {
	c, preq, err := m.procIO(ctx, id, req, pio)
	if err != nil {
		return agent.ProcOutputResult{}, err
	}
	res, err := c.StartFollowProc(ctx, preq, started, output)
	if err != nil {
		return agent.ProcOutputResult{}, fmt.Errorf("process in sandbox %s: %w", id, err)
	}
	return res, nil
}

// procIO checks req and pio and returns the agent's request and the
// agent of running sandbox id.
func (m *Manager) procIO(ctx context.Context, id string, req ProcRequest, pio ProcIO) (*agent.Client, agent.ProcRequest, error) {
	preq, err := procRequest(req)
	if err != nil {
		return nil, agent.ProcRequest{}, err
	}
	preq.Tag, preq.TTY, preq.Rows, preq.Cols, preq.Stdin = pio.Tag, pio.TTY, pio.Rows, pio.Cols, pio.Stdin
	preq.FlowControl, preq.AwaitWriter, preq.OutputLimit = pio.FlowControl, pio.FlowControl, pio.OutputLimit
	if err := preq.Validate(); err != nil {
		return nil, agent.ProcRequest{}, errdefs.Invalid("process: %v", err)
	}
	c, err := m.Agent(ctx, id)
	if err != nil {
		return nil, agent.ProcRequest{}, err
	}
	return c, preq, nil
}

// AttachProc attaches to process pid of sandbox id, its output from
// opts.Since on; a writer attachment is an ErrFailedPrecondition while
// another is attached, unless opts.Takeover.
func (m *Manager) AttachProc(ctx context.Context, id, pid string, opts agent.AttachOptions) (*agent.ProcAttachment, error) {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return nil, err
	}
	a, err := c.AttachProc(ctx, pid, opts)
	return a, procErr(err, id, pid)
}

// Procs returns the background processes of sandbox id, running and
// recently ended, in the order they started.
func (m *Manager) Procs(ctx context.Context, id string) ([]agent.ProcInfo, error) {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return nil, err
	}
	infos, err := c.Procs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list processes of sandbox %s: %w", id, err)
	}
	return infos, nil
}

// ProcStdin writes r to the input of process pid of sandbox id, and then
// ends that input when eof is set.
func (m *Manager) ProcStdin(ctx context.Context, id, pid string, r io.Reader, eof bool) error {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return err
	}
	return procErr(c.ProcStdin(ctx, pid, r, eof), id, pid)
}

// ResizeProc sets the terminal size of process pid of sandbox id.
func (m *Manager) ResizeProc(ctx context.Context, id, pid string, rows, cols uint16) error {
	c, err := m.Agent(ctx, id)
	if err != nil {
		return err
	}
	return procErr(c.ProcResize(ctx, pid, rows, cols), id, pid)
}
