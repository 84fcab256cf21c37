package service

// Interactive background processes (a tag, a terminal or a stdin pipe),
// for the surfaces whose clients drive them (E2B's envd protocol).

import (
	"context"
	"io"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/manager"
)

// ProcIO says how a background process takes input and gives output: Tag
// names it beside its id (letters, digits, '.', '_', '-'); TTY runs it on
// a pseudo-terminal of Rows x Cols (24 x 80 when zero), whose output is
// one stream and which always takes input; Stdin gives one without TTY a
// pipe as its input (otherwise it reads /dev/null).
type ProcIO struct {
	Tag        string
	TTY        bool
	Rows, Cols uint16
	Stdin      bool
}

// ProcDetail is a background command with what interactive clients show
// of it: its process id in the sandbox, its tag and whether it has a
// terminal.
type ProcDetail struct {
	Proc
	Pid int
	Tag string
	TTY bool
}

func procDetailOf(info agent.ProcInfo) ProcDetail {
	return ProcDetail{Proc: procOf(info), Pid: info.Pid, Tag: info.Tag, TTY: info.TTY}
}

// StartProcIO starts a background command as StartProc does, with the
// input and output pio describes.
func (s *Sandboxes) StartProcIO(ctx context.Context, id string, req ProcRequest, pio ProcIO) (ProcDetail, error) {
	info, err := s.m.StartProcIO(ctx, id,
		manager.ProcRequest{Command: req.Command, Shell: req.Shell, Env: req.Env, Cwd: req.Cwd, Timeout: req.Timeout},
		manager.ProcIO{Tag: pio.Tag, TTY: pio.TTY, Rows: pio.Rows, Cols: pio.Cols, Stdin: pio.Stdin})
	if err != nil {
		return ProcDetail{}, err
	}
	return procDetailOf(info), nil
}

// Procs returns the background commands of sandbox id, running and
// recently ended, in the order they started.
func (s *Sandboxes) Procs(ctx context.Context, id string) ([]ProcDetail, error) {
	infos, err := s.m.Procs(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]ProcDetail, len(infos))
	for i, info := range infos {
		out[i] = procDetailOf(info)
	}
	return out, nil
}

// ProcInput writes r to the input of background command pid of sandbox
// id (an ErrFailedPrecondition when it takes none or has ended).
func (s *Sandboxes) ProcInput(ctx context.Context, id, pid string, r io.Reader) error {
	return s.m.ProcStdin(ctx, id, pid, r, false)
}

// CloseProcInput ends the input of background command pid of sandbox id:
// its stdin pipe is closed; a terminal is sent its end-of-file character.
func (s *Sandboxes) CloseProcInput(ctx context.Context, id, pid string) error {
	return s.m.ProcStdin(ctx, id, pid, nil, true)
}

// ResizeProc sets the terminal size of background command pid of sandbox
// id (an ErrInvalidArgument when it has no terminal).
func (s *Sandboxes) ResizeProc(ctx context.Context, id, pid string, rows, cols uint16) error {
	return s.m.ResizeProc(ctx, id, pid, rows, cols)
}
