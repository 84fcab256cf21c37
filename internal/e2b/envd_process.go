package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/e2b/envdpb/process"
	"github.com/agent2env/agent2env/internal/e2b/envdpb/process/processconnect"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Procs is what envd's process service needs of the sandbox service: the
// sandbox's background processes, with their input and terminal.
type Procs interface {
	StartFollowProc(ctx context.Context, id string, req service.ProcRequest, pio service.ProcIO, started func(service.ProcDetail) error, out service.TerminalOutput) (service.ProcOutputResult, error)
	Procs(ctx context.Context, id string) ([]service.ProcDetail, error)
	FollowProc(ctx context.Context, id, pid string, since int64, out service.TerminalOutput) (service.ProcOutputResult, error)
	ProcInput(ctx context.Context, id, pid string, r io.Reader) error
	CloseProcInput(ctx context.Context, id, pid string) error
	SignalProc(ctx context.Context, id, pid, sig string) error
	ResizeProc(ctx context.Context, id, pid string, rows, cols uint16) error
}

var _ Procs = (*service.Sandboxes)(nil)

// headerKeepalive is the client's interval, in seconds, between the
// keepalive events of a quiet process stream.
const headerKeepalive = "Keepalive-Ping-Interval"

// processService serves process.Process over a sandbox's background
// processes (agent2env's detached processes). E2B's pid is the process's
// id in the sandbox; agent2env's own id stays internal.
type processService struct {
	procs Procs
}

var _ processconnect.ProcessHandler = (*processService)(nil)

// startRequest is the background process msg asks for, bounded by
// timeout (zero: none).
func startRequest(msg *process.StartRequest, timeout time.Duration) (service.ProcRequest, service.ProcIO, error) {
	cfg := msg.GetProcess()
	if cfg.GetCmd() == "" {
		return service.ProcRequest{}, service.ProcIO{}, errdefs.Invalid("process.cmd is required")
	}
	req := service.ProcRequest{Command: append([]string{cfg.GetCmd()}, cfg.GetArgs()...), Env: cfg.GetEnvs(), Timeout: timeout}
	cwd, err := resolvePath(cfg.GetCwd())
	if err != nil {
		return service.ProcRequest{}, service.ProcIO{}, err
	}
	req.Cwd = cwd
	pio := service.ProcIO{Tag: msg.GetTag()}
	if msg.Pty != nil {
		pio.TTY = true
		pio.Rows, pio.Cols = ptySize(msg.GetPty())
	} else {
		// The proto's default, for older clients, is a stdin.
		pio.Stdin = msg.Stdin == nil || msg.GetStdin()
	}
	return req, pio, nil
}

// requestTimeout is the Connect-Timeout-Ms of h, which bounds a process
// as it bounds its stream; zero when there is none.
func requestTimeout(h http.Header) (time.Duration, error) {
	raw := h.Get("Connect-Timeout-Ms")
	if raw == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || ms < 0 {
		return 0, errdefs.Invalid("Connect-Timeout-Ms %q is not a number of milliseconds", raw)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// maxKeepalive bounds the client's keepalive interval: a longer one is
// as good as none, and one past time.Duration's range would wrap round
// to a negative interval, a keepalive at every turn.
const maxKeepalive = 24 * time.Hour

// keepaliveInterval is the client's Keepalive-Ping-Interval, at most
// maxKeepalive; zero (no keepalives) when it gives none.
func keepaliveInterval(h http.Header) time.Duration {
	s, err := strconv.Atoi(h.Get(headerKeepalive))
	if err != nil || s <= 0 {
		return 0
	}
	return time.Duration(min(s, int(maxKeepalive/time.Second))) * time.Second
}

func (s *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	if err := checkUser(req.Header()); err != nil {
		return err
	}
	timeout, err := requestTimeout(req.Header())
	if err != nil {
		return rpcError(err)
	}
	preq, pio, err := startRequest(req.Msg, timeout)
	if err != nil {
		return rpcError(err)
	}
	id := sandboxOf(ctx)
	// The output waits for this stream, as envd's does for its clients:
	// one that reads slowly holds the process back and misses nothing.
	pio.FlowControl = true
	send := func(ev *process.ProcessEvent) error { return stream.Send(&process.StartResponse{Event: ev}) }
	// The start and the stream are one exchange with the sandbox.
	return s.follow(ctx, keepaliveInterval(req.Header()), send, func(ctx context.Context, started func(service.ProcDetail) error, out service.TerminalOutput) (service.ProcOutputResult, error) {
		return s.procs.StartFollowProc(ctx, id, preq, pio, started, out)
	})
}

func (s *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	id := sandboxOf(ctx)
	p, err := s.find(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	// As envd does, a connection gets the output from now on.
	send := func(ev *process.ProcessEvent) error { return stream.Send(&process.ConnectResponse{Event: ev}) }
	return s.follow(ctx, keepaliveInterval(req.Header()), send, func(ctx context.Context, started func(service.ProcDetail) error, out service.TerminalOutput) (service.ProcOutputResult, error) {
		if err := started(p); err != nil {
			return service.ProcOutputResult{}, err
		}
		return s.procs.FollowProc(ctx, id, p.ID, p.Output, out)
	})
}

// followFunc reads a process to its end: it calls started with the
// process before it sends any output to out.
type followFunc func(ctx context.Context, started func(service.ProcDetail) error, out service.TerminalOutput) (service.ProcOutputResult, error)

// follow streams the process run reads: its start, its output,
// keepalives every keepalive while it is quiet, and its end. The
// client's going away ends the stream, not the process.
//
// The output of a process started with flow control (Start) waits for
// the stream while it is the process's writer (service.Sandboxes.
// StartFollowProc, FollowProc) rather than overwrite what the client has
// not read, as envd's output waits for its clients.
func (s *processService) follow(ctx context.Context, keepalive time.Duration, send func(*process.ProcessEvent) error, run followFunc) error {
	ctx, cancel := context.WithCancelCause(ctx)
	var keepalives sync.WaitGroup
	// The keepalives end before the handler does: nothing is sent after.
	defer keepalives.Wait()
	defer cancel(nil)
	var mu sync.Mutex     // one Send at a time
	var ended bool        // the end is sent: nothing follows it
	var quiet *time.Timer // fires after keepalive without a Send
	if keepalive > 0 {
		quiet = time.NewTimer(keepalive)
		defer quiet.Stop()
	}
	emit := func(ev *process.ProcessEvent) error {
		mu.Lock()
		defer mu.Unlock()
		if ended || (ctx.Err() != nil && ev.GetKeepalive() != nil) {
			return nil
		}
		_, ended = ev.Event.(*process.ProcessEvent_End)
		if quiet != nil {
			quiet.Reset(keepalive)
		}
		return send(ev)
	}
	var p service.ProcDetail // the process, once started
	started := func(sp service.ProcDetail) error {
		p = sp
		if err := emit(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: uint32(p.Pid)}}}); err != nil {
			return err
		}
		if quiet != nil {
			keepalives.Go(func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-quiet.C:
					}
					if err := emit(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}); err != nil {
						cancel(err)
						return
					}
				}
			})
		}
		return nil
	}
	out := func(stream byte, _ int64, b []byte) error {
		data := &process.ProcessEvent_DataEvent{}
		switch b = slices.Clone(b); {
		case p.TTY:
			data.Output = &process.ProcessEvent_DataEvent_Pty{Pty: b}
		case stream == api.TerminalStreamStderr:
			data.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: b}
		default:
			data.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: b}
		}
		return emit(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: data}})
	}
	res, err := run(ctx, started, out)
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause // the keepalive's send failed
	}
	if err != nil {
		if p.ID == "" {
			return rpcError(err) // it did not start
		}
		return rpcError(fmt.Errorf("follow process %d: %w", p.Pid, err))
	}
	return emit(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: endEvent(res.Proc)}})
}

// endEvent is how p ended as envd reports it, after Go's os.ProcessState:
// an exit is its code and "exit status N"; a signal's end has exit code
// -1, exited false and "signal: <name>". Error is set unless it exited 0.
func endEvent(p service.Proc) *process.ProcessEvent_EndEvent {
	ev := &process.ProcessEvent_EndEvent{ExitCode: int32(p.ExitCode), Exited: true, Status: "exit status " + strconv.Itoa(p.ExitCode)}
	if p.Signal != "" {
		ev.ExitCode, ev.Exited, ev.Status = -1, false, "signal: "+syscall.Signal(p.ExitCode-128).String()
	}
	if ev.ExitCode != 0 {
		ev.Error = &ev.Status
	}
	return ev
}

// find returns the process sel names in sandbox id: by pid, the running
// one of that pid (or the newest that ended); by tag, the one of that
// tag. NotFound when there is none, as envd answers.
func (s *processService) find(ctx context.Context, id string, sel *process.ProcessSelector) (service.ProcDetail, error) {
	_, byTag := sel.GetSelector().(*process.ProcessSelector_Tag)
	if _, byPid := sel.GetSelector().(*process.ProcessSelector_Pid); !byPid && !byTag {
		return service.ProcDetail{}, connect.NewError(connect.CodeInvalidArgument, errors.New("process: give a pid or a tag"))
	}
	all, err := s.procs.Procs(ctx, id)
	if err != nil {
		return service.ProcDetail{}, rpcError(err)
	}
	var found *service.ProcDetail
	for i := range all {
		p := &all[i]
		match := p.Pid == int(sel.GetPid())
		if byTag {
			match = p.Tag != "" && p.Tag == sel.GetTag()
		}
		if match && (found == nil || p.Running || !found.Running) {
			found = p
		}
	}
	if found == nil {
		return service.ProcDetail{}, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %s not found", selectorText(sel)))
	}
	return *found, nil
}

// findRunning is find for the calls that act on a running process: one
// that has ended is not found, as in envd, which forgets it.
func (s *processService) findRunning(ctx context.Context, id string, sel *process.ProcessSelector) (service.ProcDetail, error) {
	p, err := s.find(ctx, id, sel)
	if err == nil && !p.Running {
		err = connect.NewError(connect.CodeNotFound, fmt.Errorf("process %s has ended", selectorText(sel)))
	}
	return p, err
}

func selectorText(sel *process.ProcessSelector) string {
	if _, ok := sel.GetSelector().(*process.ProcessSelector_Tag); ok {
		return "with tag " + strconv.Quote(sel.GetTag())
	}
	return "with pid " + strconv.FormatUint(uint64(sel.GetPid()), 10)
}

func (s *processService) List(ctx context.Context, _ *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	all, err := s.procs.Procs(ctx, sandboxOf(ctx))
	if err != nil {
		return nil, rpcError(err)
	}
	out := &process.ListResponse{}
	for _, p := range all {
		if !p.Running {
			continue // envd lists the processes that run
		}
		info := &process.ProcessInfo{Pid: uint32(p.Pid), Config: &process.ProcessConfig{}}
		if len(p.Command) > 0 {
			info.Config.Cmd, info.Config.Args = p.Command[0], p.Command[1:]
		}
		if p.Tag != "" {
			info.Tag = &p.Tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// input returns the bytes of in, stdin or pty alike (agent2env's
// processes have one input).
func input(in *process.ProcessInput) []byte {
	if b := in.GetPty(); b != nil {
		return b
	}
	return in.GetStdin()
}

func (s *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	id := sandboxOf(ctx)
	p, err := s.findRunning(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := s.procs.ProcInput(ctx, id, p.ID, bytes.NewReader(input(req.Msg.GetInput()))); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (s *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	id := sandboxOf(ctx)
	var p *service.ProcDetail
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			found, err := s.findRunning(ctx, id, ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			p = &found
		case *process.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the stream's first event must be start"))
			}
			if err := s.procs.ProcInput(ctx, id, p.ID, bytes.NewReader(input(ev.Data.GetInput()))); err != nil {
				return nil, rpcError(err)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func (s *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	var sig string
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL:
		sig = "KILL"
	case process.Signal_SIGNAL_SIGTERM:
		sig = "TERM"
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %v: want SIGTERM or SIGKILL", req.Msg.GetSignal()))
	}
	id := sandboxOf(ctx)
	p, err := s.findRunning(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := s.procs.SignalProc(ctx, id, p.ID, sig); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (s *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	id := sandboxOf(ctx)
	p, err := s.findRunning(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.TTY {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("a pty has no stdin to close: send Ctrl+D (0x04) instead"))
	}
	if err := s.procs.CloseProcInput(ctx, id, p.ID); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

func (s *processService) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	id := sandboxOf(ctx)
	p, err := s.findRunning(ctx, id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty != nil {
		rows, cols := ptySize(req.Msg.GetPty())
		if err := s.procs.ResizeProc(ctx, id, p.ID, rows, cols); err != nil {
			return nil, rpcError(err)
		}
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

// ptySize is a terminal's size as envd takes it, in Start and in Update:
// the wire's uint32 rows and cols cut to the uint16 of a window size, the
// low 16 bits kept (70000 is 4464), never refused. A zero is the
// daemon's default size (ResizeProc).
func ptySize(pty *process.PTY) (rows, cols uint16) {
	size := pty.GetSize()
	return uint16(size.GetRows()), uint16(size.GetCols())
}
