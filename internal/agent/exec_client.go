package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Exec runs req, copying its output to stdout and stderr (either may be
// nil to discard) as it is produced. stdin is used when req.Stdin is set.
// A command that runs and fails is not an error: see ExecResult.
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (ExecResult, error) {
	return c.ExecAccepted(ctx, req, nil, stdin, stdout, stderr)
}

// ExecAccepted is Exec calling accepted, when it is not nil, once the
// agent has accepted the command (started it, or found why it cannot
// start), before any of its output. An error returned before that is the
// agent's refusal: nothing ran.
//
// The command runs as a process of the agent's that the exec attaches to
// (POST /v1/exec/attach): a checkpoint of the sandbox suspends the exec
// as it does an attachment (SuspendAttachments), and it attaches again
// once the checkpoint is done, from where its output stopped: its caller
// sees a pause. A main process, and every command of an agent older than
// that (which refuses the exchange first, before anything runs), runs on
// one request (POST /v1/exec), which a checkpoint waits for.
func (c *Client) ExecAccepted(ctx context.Context, req ExecRequest, accepted func(), stdin io.Reader, stdout, stderr io.Writer) (ExecResult, error) {
	if err := req.Validate(); err != nil {
		return ExecResult{}, errdefs.Invalid("exec: %v", err)
	}
	line, err := json.Marshal(req)
	if err != nil {
		return ExecResult{}, fmt.Errorf("encode exec request: %w", err)
	}
	line = append(line, '\n')
	if !req.Main {
		if !req.Stdin {
			stdin = nil
		}
		res, err := c.execAttached(ctx, line, req.Stdin, accepted, stdin, stdout, stderr)
		if !errors.Is(err, ErrOlderAgent) {
			return res, err
		}
		// Refused before it read anything: it runs on one request. (The
		// refusal is not kept: the sandbox's next start runs the
		// daemon's agent, which takes it, and no other commands.)
	}
	var body io.Reader = bytes.NewReader(line)
	if req.Stdin && stdin != nil {
		body = io.MultiReader(body, stdin)
	}
	return c.execRequest(ctx, body, accepted, stdout, stderr)
}

// execRequest runs the command whose request body is (POST /v1/exec).
func (c *Client) execRequest(ctx context.Context, body io.Reader, accepted func(), stdout, stderr io.Writer) (ExecResult, error) {
	resp, err := c.do(ctx, http.MethodPost, "/v1/exec", nil, body)
	if err != nil {
		return ExecResult{}, err
	}
	defer resp.Body.Close()
	if accepted != nil {
		accepted()
	}
	var res ExecResult
	err = c.readFrames(ctx, resp.Body, "exec", func(kind byte, p []byte) (bool, error) {
		var err error
		switch kind {
		case frameStdout:
			err = write(stdout, p)
		case frameStderr:
			err = write(stderr, p)
		case frameResult:
			if err := json.Unmarshal(p, &res); err != nil {
				return true, fmt.Errorf("decode exec result: %w", err)
			}
			return true, nil
		}
		if err != nil {
			return true, fmt.Errorf("copy exec output: %w", err)
		}
		return false, nil
	})
	return res, err
}

// execStream is the exchange of an exec with the process it runs
// (handleExecAttach): its request's body carries the line that starts it
// and then its input frames, its response the process's id, its output
// and how it ended. A checkpoint suspends it (suspend): the exchange
// ends, and the exec attaches to the process again (resume).
type execStream struct {
	c *Client
	// wmu orders the input sent, one frame at a time: on the body, then
	// on the attachment made again. cmu guards the rest; moved, on cmu,
	// is signalled when att is set or the exec has ended.
	wmu   sync.Mutex
	cmu   sync.Mutex
	moved *sync.Cond
	body  *io.PipeWriter
	// suspended: the body carries no more; input waits for att.
	suspended bool
	att       *ProcAttachment
	ended     bool
}

// newExecStream is the exchange of an exec, or of a kernel's execution,
// whose request body is written to body.
func newExecStream(c *Client, body *io.PipeWriter) *execStream {
	x := &execStream{c: c, body: body}
	x.moved = sync.NewCond(&x.cmu)
	return x
}

// isSuspended reports whether a checkpoint suspended the exchange.
func (x *execStream) isSuspended() bool {
	x.cmu.Lock()
	defer x.cmu.Unlock()
	return x.suspended
}

// errExecEnded is what input sent after the end of its exec gets.
var errExecEnded = errors.New("the command has ended")

// execAttached runs the command line asks for (POST /v1/exec/attach),
// with stdin as its input when withStdin (nil: none), and reports
// ErrOlderAgent when the agent has no such route.
func (c *Client) execAttached(ctx context.Context, line []byte, withStdin bool, accepted func(), stdin io.Reader, stdout, stderr io.Writer) (ExecResult, error) {
	pr, pw := io.Pipe()
	x := newExecStream(c, pw)
	// Tracked from the start: a checkpoint that comes before the agent
	// has answered lets go of it too; one under way is waited for.
	if err := c.trackWhenFree(ctx, x); err != nil {
		return ExecResult{}, err
	}
	defer c.track(x, false)
	// Until one is taken, it asks whether the agent takes it before it
	// sends the body: an older agent answers 404 without reading, which
	// it would otherwise send only once the body has ended.
	var h http.Header
	if !c.execsTaken.Load() {
		h = http.Header{"Expect": {"100-continue"}}
	}
	resp, err := c.doWith(ctx, http.MethodPost, "/v1/exec/attach", nil, io.MultiReader(bytes.NewReader(line), pr), h)
	if err != nil {
		x.end(err)
		return ExecResult{}, err
	}
	c.execsTaken.Store(true)
	if accepted != nil {
		accepted()
	}
	if withStdin {
		go x.feed(stdin)
	}
	emit := toWriters(stdout, stderr)
	var (
		id     string
		out    ProcOutputResult
		failed *ExecResult // of a command that could not start
	)
	err = c.readFrames(ctx, resp.Body, "exec", func(kind byte, p []byte) (bool, error) {
		switch {
		case id != "":
			return out.frame(kind, p, emit)
		case kind == frameStarted:
			var info ProcInfo
			if err := json.Unmarshal(p, &info); err != nil || info.ID == "" {
				return true, fmt.Errorf("decode the exec's process (%q): %w: %w", p, errdefs.ErrUnavailable, err)
			}
			id = info.ID
		case kind == frameStderr:
			// Why it could not start.
			if err := write(stderr, p); err != nil {
				return true, fmt.Errorf("copy exec output: %w", err)
			}
		case kind == frameResult:
			failed = new(ExecResult)
			if err := json.Unmarshal(p, failed); err != nil {
				return true, fmt.Errorf("decode exec result: %w", err)
			}
			return true, nil
		}
		return false, nil
	})
	if err == nil {
		x.end(nil)
		// The agent ends its answer once the body has ended: the
		// connection goes back to the pool then, the caller not waiting.
		go func() {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
		if failed != nil {
			return *failed, nil
		}
		return execResult(out.Proc, stderr), nil
	}
	resp.Body.Close()
	if id == "" || !x.isSuspended() {
		x.end(err)
		return ExecResult{}, err
	}
	c.track(x, false) // the attachment made again is tracked instead
	return x.resume(ctx, id, out.Next, emit, stderr)
}

// suspend lets go of the exchange for a checkpoint: a frameSuspend and
// the end of the body, sent once the frame being sent has gone (the
// request may still wait for its connection, which the checkpoint holds
// back); the agent then ends its answer, and the exec attaches again.
func (x *execStream) suspend() bool {
	x.cmu.Lock()
	done := x.suspended || x.ended
	x.cmu.Unlock()
	if done {
		return false
	}
	if !lockWithin(&x.wmu, suspendWait) {
		return false // input stuck on a command that does not read it
	}
	x.cmu.Lock()
	defer x.cmu.Unlock()
	if x.suspended || x.ended {
		x.wmu.Unlock()
		return false
	}
	x.suspended = true
	go func() {
		defer x.wmu.Unlock()
		_ = writeFrame(x.body, frameSuspend, nil)
		_ = x.body.Close()
	}()
	return true
}

// resume attaches again, as its writer, to the process id of an exec a
// checkpoint suspended, from offset since, once the checkpoint is done
// (the client's dialer waits for it), and delivers the rest of the output
// to emit and the input waiting in send.
func (x *execStream) resume(ctx context.Context, id string, since int64, emit OutputFunc, stderr io.Writer) (ExecResult, error) {
	a, err := x.c.AttachProc(ctx, id, AttachOptions{Since: since, Output: emit})
	if err != nil {
		x.end(err)
		if ctx.Err() != nil {
			// The agent keeps the process a while for its writer: it
			// ends now, as the command of a client that has gone does.
			go x.c.killAbandoned(id)
		}
		return ExecResult{}, fmt.Errorf("exec after a checkpoint: %w", err)
	}
	defer a.Close()
	x.cmu.Lock()
	x.att = a
	x.moved.Broadcast()
	x.cmu.Unlock()
	defer x.end(nil)
	// The end of ctx ends the attachment, which ends the process.
	stop := context.AfterFunc(ctx, func() { a.Close() })
	res, err := a.Wait()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return ExecResult{}, ctx.Err()
		}
		return ExecResult{}, fmt.Errorf("exec after a checkpoint: %w", err)
	}
	return execResult(res.Proc, stderr), nil
}

// abandonedKillWait bounds the kill of an exec's process whose client
// left while it was suspended.
const abandonedKillWait = time.Minute

// killAbandoned ends the process id of an exec whose client left.
func (c *Client) killAbandoned(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonedKillWait)
	defer cancel()
	_, _ = c.KillProc(ctx, id)
}

// feed sends r (nil: nothing) as the process's input, then its end.
func (x *execStream) feed(r io.Reader) {
	if r != nil {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 && x.send(frameStdin, buf[:n]) != nil {
				return
			}
			if err != nil {
				break
			}
		}
	}
	_ = x.send(frameEOF, nil)
}

// send sends one input frame: on the body, or, once a checkpoint has
// suspended the exchange, on the attachment made again, which it waits
// for.
func (x *execStream) send(kind byte, p []byte) error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.cmu.Lock()
	for x.suspended && x.att == nil && !x.ended {
		x.moved.Wait()
	}
	att, ended := x.att, x.ended
	x.cmu.Unlock()
	switch {
	case att != nil:
		return att.send(kind, p)
	case ended:
		return errExecEnded
	}
	return writeFrame(x.body, kind, p)
}

// end ends the exec's exchange: input sent from now on fails, and the
// body ends (with err, when not nil, which aborts the request: the agent
// then kills the command).
func (x *execStream) end(err error) {
	x.cmu.Lock()
	x.ended = true
	x.moved.Broadcast()
	x.cmu.Unlock()
	_ = x.body.CloseWithError(err)
}

// oomNote is what stderr is told of a command the out-of-memory killer
// ended.
const oomNote = "agent2env: the command was killed by the out-of-memory killer: the sandbox reached its memory limit\n"

// execResult is the ExecResult of the exec whose process ended as info
// says; the end of one the out-of-memory killer ended is told to stderr
// too, where its user looks first.
func execResult(info ProcInfo, stderr io.Writer) ExecResult {
	res := ExecResult{ExitCode: info.ExitCode, Signal: info.Signal, TimedOut: info.TimedOut, Reason: info.Reason,
		OOMKilled: info.Reason == ReasonOutOfMemory, Duration: info.Ended.Sub(info.Started)}
	if res.OOMKilled {
		_ = write(stderr, []byte(oomNote))
	}
	return res
}
