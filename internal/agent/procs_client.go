package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// StartProc starts a detached process and returns as soon as it runs.
// A command that cannot start is an ErrInvalidArgument (code
// COMMAND_NOT_FOUND or START_FAILED), a tag a running process has an
// ErrAlreadyExists.
func (c *Client) StartProc(ctx context.Context, req ProcRequest) (ProcInfo, error) {
	if err := req.Validate(); err != nil {
		return ProcInfo{}, errdefs.Invalid("start process: %v", err)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return ProcInfo{}, fmt.Errorf("encode process request: %w", err)
	}
	var info ProcInfo
	err = c.sendJSON(ctx, http.MethodPost, "/v1/procs", nil, bytes.NewReader(b), &info)
	return info, err
}

// Procs lists the detached processes, running and ended, in the order
// they started.
func (c *Client) Procs(ctx context.Context) ([]ProcInfo, error) {
	var out []ProcInfo
	err := c.getJSON(ctx, http.MethodGet, "/v1/procs", nil, &out)
	return out, err
}

// Proc describes the process named by its id or tag.
func (c *Client) Proc(ctx context.Context, id string) (ProcInfo, error) {
	var info ProcInfo
	err := c.getJSON(ctx, http.MethodGet, procPath(id, ""), nil, &info)
	return info, err
}

// KillProc ends a process, if it runs (a signal to its group, SIGKILL to
// all it started after a grace), forgets it and returns how it ended.
func (c *Client) KillProc(ctx context.Context, id string) (ProcInfo, error) {
	var info ProcInfo
	err := c.getJSON(ctx, http.MethodDelete, procPath(id, ""), nil, &info)
	return info, err
}

// ProcStdin writes r (nil: nothing) to a process's input, then ends it
// when eof is set. A process that takes no input, or has ended, is an
// ErrFailedPrecondition.
func (c *Client) ProcStdin(ctx context.Context, id string, r io.Reader, eof bool) error {
	if r == nil {
		r = bytes.NewReader(nil)
	}
	body, src, stop := cancellableBody(ctx, r)
	defer stop()
	return src.readFailed(c.sendJSON(ctx, http.MethodPost, procPath(id, "stdin"), url.Values{"eof": {strconv.FormatBool(eof)}}, body, nil))
}

// ProcSignal sends sig, a name (TERM, SIGTERM) or a number, to a
// process's group.
func (c *Client) ProcSignal(ctx context.Context, id, sig string) error {
	if _, err := parseSignal(sig); err != nil {
		return errdefs.Invalid("signal process %s: %v", id, err)
	}
	return c.getJSON(ctx, http.MethodPost, procPath(id, "signal"), url.Values{"signal": {sig}}, nil)
}

// ProcResize sets the size of a process's tty.
func (c *Client) ProcResize(ctx context.Context, id string, rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return errdefs.Invalid("resize process %s: a terminal of %d x %d", id, rows, cols)
	}
	q := url.Values{"rows": {strconv.Itoa(int(rows))}, "cols": {strconv.Itoa(int(cols))}}
	return c.getJSON(ctx, http.MethodPost, procPath(id, "resize"), q, nil)
}

// ProcOutputOptions choose what ProcOutput reads.
type ProcOutputOptions struct {
	// Since is the offset to read from: 0 for all that is kept, the Next
	// of a previous read to go on from it.
	Since int64
	// Follow keeps reading until the process has ended and all its
	// output is read; otherwise the read ends with what there is now.
	Follow bool
}

// ProcOutputResult is where a read of a process's output ended.
type ProcOutputResult struct {
	// Next is the offset after the last byte delivered: the Since of a
	// read that goes on from this one.
	Next int64
	// Missed counts the bytes asked for that were no longer kept: before
	// the first byte delivered (Since older than the ring holds) and
	// where a reader that fell behind was overtaken.
	Missed int64
	// Proc is the process as the read ended: Running is unset once it
	// has ended.
	Proc ProcInfo
}

// ProcOutput copies a process's output, from opts.Since on, to stdout and
// stderr (either nil to discard; a tty's output is all stdout) as it
// comes. Frames of one stream are delivered in order and whole, so
// nothing, UTF-8 characters included, is cut except where Missed counts.
func (c *Client) ProcOutput(ctx context.Context, id string, opts ProcOutputOptions, stdout, stderr io.Writer) (ProcOutputResult, error) {
	q := url.Values{"since": {strconv.FormatInt(opts.Since, 10)}, "follow": {strconv.FormatBool(opts.Follow)}}
	resp, err := c.do(ctx, http.MethodGet, procPath(id, "output"), q, nil)
	if err != nil {
		return ProcOutputResult{}, err
	}
	defer resp.Body.Close()
	res := ProcOutputResult{Next: opts.Since}
	emit := toWriters(stdout, stderr)
	err = c.readFrames(ctx, resp.Body, "process output", func(kind byte, p []byte) (bool, error) {
		return res.frame(kind, p, emit)
	})
	return res, err
}

// OutputFunc receives a process's output as it comes: p, of stream
// (StreamStdout or StreamStderr; a tty's is all stdout), starts at offset
// at of the process's output; an empty p says only that the output goes
// on from at, not from where the last call left it (what lay between is
// no longer kept, or the offset asked for was past the end). It must not
// keep p. An error ends the stream.
type OutputFunc func(stream byte, at int64, p []byte) error

// Streams of an OutputFunc.
const (
	StreamStdout = frameStdout
	StreamStderr = frameStderr
)

// toWriters is the OutputFunc that writes each stream to its writer
// (nil: discarded).
func toWriters(stdout, stderr io.Writer) OutputFunc {
	return func(stream byte, _ int64, p []byte) error {
		if len(p) == 0 {
			return nil
		}
		if stream == frameStderr {
			return write(stderr, p)
		}
		return write(stdout, p)
	}
}

// frame applies one frame of an output stream, delivering output to
// emit, and reports whether it was the last.
func (res *ProcOutputResult) frame(kind byte, p []byte, emit OutputFunc) (bool, error) {
	var err error
	switch kind {
	case frameOffset:
		if len(p) != 8 {
			return true, fmt.Errorf("offset frame of %d bytes", len(p))
		}
		at := int64(binary.BigEndian.Uint64(p))
		res.Missed += max(0, at-res.Next)
		if at != res.Next {
			err = emit(frameStdout, at, nil)
		}
		res.Next = at
	case frameStdout, frameStderr:
		err = emit(kind, res.Next, p)
		res.Next += int64(len(p))
	case frameResult:
		if err := json.Unmarshal(p, &res.Proc); err != nil {
			return true, fmt.Errorf("decode process info: %w", err)
		}
		return true, nil
	}
	if err != nil {
		return true, fmt.Errorf("copy process output: %w", err)
	}
	return false, nil
}

// AttachOptions choose how AttachProc attaches.
type AttachOptions struct {
	// Since is the offset the output starts from (see ProcOutputOptions).
	Since int64
	// ReadOnly attaches as a reader: output only. Otherwise the
	// attachment is the process's one writer, which fails with an
	// ErrFailedPrecondition while another is attached, unless Takeover,
	// which ends the other's attachment (its Wait says ErrTakenOver).
	ReadOnly, Takeover bool
	// Stderr, when set, receives the stderr of a process without tty;
	// otherwise Read returns it with stdout.
	Stderr io.Writer
	// Output, when set, receives all the output, with its offsets, in
	// place of Read and Stderr (Read then returns io.EOF): a caller that
	// must know where each byte lies, to resume from it. It is called
	// from one goroutine, in order; while it blocks, the stream waits.
	Output OutputFunc
}

// AttachProc attaches to a process: a two-way stream on a connection of
// its own, whose Read is the process's output from opts.Since to its end
// and whose Write is its input. ctx bounds the attaching only.
func (c *Client) AttachProc(ctx context.Context, id string, opts AttachOptions) (*ProcAttachment, error) {
	q := url.Values{
		"since":    {strconv.FormatInt(opts.Since, 10)},
		"readonly": {strconv.FormatBool(opts.ReadOnly)},
		"takeover": {strconv.FormatBool(opts.Takeover)},
	}
	conn, err := c.open(ctx, procPath(id, "attach")+"?"+q.Encode(), procProtocol, "attach process "+id)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	a := &ProcAttachment{c: c, id: id, conn: conn, out: pr, readOnly: opts.ReadOnly, done: make(chan struct{})}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.resumed = sync.NewCond(&a.cmu)
	a.res.Next = opts.Since
	emit := opts.Output
	if emit == nil {
		stderr := opts.Stderr
		if stderr == nil {
			stderr = pw
		}
		emit = toWriters(pw, stderr)
	} else {
		pw.Close()
	}
	held := c.track(a, true)
	go a.receive(pw, emit)
	if held {
		a.suspend()
	}
	return a, nil
}

// StartFollowProc starts a detached process, as StartProc does, and
// reads its output from its first byte to its end, as ProcOutput with
// Follow does, in one exchange with the agent: started is called with the
// process once it runs, then output with its output as it comes. The
// read holds the process's writer place, as a writer attachment does
// (the output of a process with FlowControl waits for output rather than
// overwrite what it has not taken; a takeover ends the read with an
// ErrTakenOver), but sends no input: ProcStdin does. An error from
// started or output, or the end of ctx, ends the read, not the process.
func (c *Client) StartFollowProc(ctx context.Context, req ProcRequest, started func(ProcInfo) error, output OutputFunc) (ProcOutputResult, error) {
	if err := req.Validate(); err != nil {
		return ProcOutputResult{}, errdefs.Invalid("start process: %v", err)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return ProcOutputResult{}, fmt.Errorf("encode process request: %w", err)
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/procs", url.Values{"follow": {"true"}}, bytes.NewReader(b))
	if err != nil {
		return ProcOutputResult{}, err
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "application/json" {
		// An agent from before ?follow started it only.
		return c.followStarted(ctx, resp.Body, started, output)
	}
	var res ProcOutputResult
	first := true
	err = c.readFrames(ctx, resp.Body, "process output", func(kind byte, p []byte) (bool, error) {
		switch {
		case first != (kind == frameStarted):
			return true, errdefs.Unavailable("frame %q out of place", kind)
		case first:
			first = false
			var info ProcInfo
			if err := json.Unmarshal(p, &info); err != nil {
				return true, fmt.Errorf("decode process info: %w", err)
			}
			return false, started(info)
		case kind == frameTakenOver:
			return true, errdefs.Mark(ErrTakenOver, errdefs.ErrFailedPrecondition)
		}
		return res.frame(kind, p, output)
	})
	return res, err
}

// followStarted is StartFollowProc's read of the process whose ProcInfo
// body holds, which an older agent started: a writer attachment.
func (c *Client) followStarted(ctx context.Context, body io.Reader, started func(ProcInfo) error, output OutputFunc) (ProcOutputResult, error) {
	var info ProcInfo
	if err := json.NewDecoder(body).Decode(&info); err != nil {
		return ProcOutputResult{}, fmt.Errorf("decode process info: %w: %w", errdefs.ErrUnavailable, err)
	}
	gate := make(chan struct{}) // closed once started has returned
	var startErr error          // what started returned, once gate is closed
	a, err := c.AttachProc(ctx, info.ID, AttachOptions{Output: func(stream byte, at int64, p []byte) error {
		<-gate
		if startErr != nil {
			return startErr
		}
		return output(stream, at, p)
	}})
	if err != nil {
		if !errors.Is(err, errdefs.ErrFailedPrecondition) { // no other writer: it would wait for one
			_, _ = c.KillProc(context.WithoutCancel(ctx), info.ID)
		}
		return ProcOutputResult{}, err
	}
	defer a.Close()
	startErr = started(info)
	close(gate)
	if startErr != nil {
		return ProcOutputResult{}, startErr
	}
	defer context.AfterFunc(ctx, func() { a.Close() })()
	res, err := a.Wait()
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return res, err
}

// ProcAttachment is a client attached to a process. Read, Write, Resize
// and CloseWrite may be called from different goroutines. A checkpoint of
// the sandbox suspends it (Client.SuspendAttachments) and it attaches
// again by itself, from where its output stopped: its user sees a pause.
type ProcAttachment struct {
	c  *Client
	id string
	// closing is set by Close: output that comes after it is dropped
	// while the agent lets go of the attachment.
	closing  atomic.Bool
	closed   sync.Once
	out      *io.PipeReader
	readOnly bool
	// wmu orders the frames sent: one at a time. cmu guards conn and
	// suspended; resumed, on cmu, is signalled when the attachment has a
	// connection again after a suspension. (A write stuck on a process
	// that takes no input holds wmu: Close takes cmu only.)
	wmu       sync.Mutex
	cmu       sync.Mutex
	resumed   *sync.Cond
	conn      net.Conn
	suspended bool
	// ctx ends with Close: an attachment waiting to attach again gives up.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// res and err are final once done is closed.
	res ProcOutputResult
	err error
}

// suspendGrace is how long the agent keeps a process whose attachment
// ends with it (EndWithWriter) once that attachment was suspended, for
// it to attach again: a checkpoint's time, and more. A daemon that dies
// meanwhile leaves it that long.
const suspendGrace = 10 * time.Minute

// suspender is an attachment a checkpoint suspends: suspend lets go of
// its connection, telling the agent it comes back, and reports whether
// it did.
type suspender interface{ suspend() bool }

// track adds a to the attachments SuspendAttachments suspends (on), or
// takes it out. It reports whether a checkpoint holds c's attachments
// now: a, which the checkpoint did not let go of, is for its caller to
// suspend.
func (c *Client) track(a suspender, on bool) (held bool) {
	c.amu.Lock()
	defer c.amu.Unlock()
	if !on {
		delete(c.attached, a)
		return false
	}
	c.addLocked(a)
	return c.held != nil
}

// addLocked adds a to c's attachments; the caller holds c.amu.
func (c *Client) addLocked(a suspender) {
	if c.attached == nil {
		c.attached = map[suspender]bool{}
	}
	c.attached[a] = true
}

// trackWhenFree adds a (unless nil) to the attachments SuspendAttachments
// suspends, once no checkpoint holds them: an exchange that has not
// started yet waits, rather than start on a connection of the pool (which
// the checkpoint's dialer does not hold back) after the checkpoint has let
// go of the attachments it knew. It fails only when ctx ends.
func (c *Client) trackWhenFree(ctx context.Context, a suspender) error {
	for {
		c.amu.Lock()
		held := c.held
		if held == nil {
			if a != nil {
				c.addLocked(a)
			}
			c.amu.Unlock()
			return nil
		}
		c.amu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// SuspendAttachments lets go of every attachment of c's, and of every
// command its Exec runs (which is one), for a checkpoint of the sandbox,
// which cannot save a connection that leaves it: each tells the agent it
// comes back (so that a process that ends with its
// writer does not), ends its end of the connection and, once the agent
// has sent what it had and closed its end, attaches again from where its
// output stopped, by c's dialer, which holds the dial back until the
// checkpoint is done. Meanwhile its input waits. Until resume is called,
// an exec that starts waits for it, and an attachment made meanwhile
// (whose dial was let through before the checkpoint held it) is
// suspended as it is made. It returns how many it let go: their
// connections close once the agent has run.
func (c *Client) SuspendAttachments() (n int, resume func()) {
	held := make(chan struct{})
	c.amu.Lock()
	c.held = held
	all := make([]suspender, 0, len(c.attached))
	for a := range c.attached {
		all = append(all, a)
	}
	c.amu.Unlock()
	for _, a := range all {
		if a.suspend() {
			n++
		}
	}
	return n, sync.OnceFunc(func() {
		c.amu.Lock()
		if c.held == held {
			c.held = nil
		}
		c.amu.Unlock()
		close(held)
	})
}

// suspend sends the suspension and ends a's side of its connection; its
// receive attaches again once the agent has ended the other side. It
// reports whether it did.
func (a *ProcAttachment) suspend() bool {
	a.cmu.Lock()
	conn, suspended := a.conn, a.suspended
	a.cmu.Unlock()
	cw, ok := conn.(interface{ CloseWrite() error })
	if suspended || !ok || a.closing.Load() {
		return false // a connection that cannot end half way is left as it is
	}
	// A write stuck on a process that takes no input holds the frames'
	// order: left as it is too (the checkpoint then says so), rather
	// than held.
	if !lockWithin(&a.wmu, suspendWait) {
		return false
	}
	defer a.wmu.Unlock()
	a.cmu.Lock()
	if a.suspended || a.conn != conn || a.closing.Load() {
		a.cmu.Unlock()
		return false
	}
	a.suspended = true
	a.cmu.Unlock()
	if !a.readOnly {
		_ = writeFrame(conn, frameSuspend, nil) // a reader's end ends nothing
	}
	_ = cw.CloseWrite()
	return true
}

// suspendWait bounds how long a suspension waits for a frame being sent.
const suspendWait = time.Second

// lockWithin locks mu unless it stays locked for d; it reports whether it
// did.
func lockWithin(mu *sync.Mutex, d time.Duration) bool {
	for end := time.Now().Add(d); !mu.TryLock(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// reattach attaches a again after its suspension, from where its output
// stopped, as the writer if it was one; or says why it cannot.
func (a *ProcAttachment) reattach() (net.Conn, error) {
	q := url.Values{"since": {strconv.FormatInt(a.res.Next, 10)}, "readonly": {strconv.FormatBool(a.readOnly)}}
	conn, err := a.c.open(a.ctx, procPath(a.id, "attach")+"?"+q.Encode(), procProtocol, "attach process "+a.id+" again")
	if err != nil {
		return nil, err
	}
	a.cmu.Lock()
	a.conn, a.suspended = conn, false
	a.resumed.Broadcast()
	a.cmu.Unlock()
	return conn, nil
}

// receive delivers the output until the stream's end, across
// suspensions.
func (a *ProcAttachment) receive(pw *io.PipeWriter, emit OutputFunc) {
	defer close(a.done)
	defer a.c.track(a, false)
	conn := a.conn
	for {
		a.err = a.c.readFrames(context.Background(), conn, "attachment", func(kind byte, p []byte) (bool, error) {
			switch {
			case a.closing.Load():
				return false, nil
			case kind == frameTakenOver:
				return true, errdefs.Mark(ErrTakenOver, errdefs.ErrFailedPrecondition)
			}
			last, err := a.res.frame(kind, p, emit)
			if err != nil && a.closing.Load() {
				return false, nil // Close ended the output's reader: drain on
			}
			return last, err
		})
		conn.Close()
		a.cmu.Lock()
		again := a.suspended && a.err != nil && !a.closing.Load()
		a.cmu.Unlock()
		if !again {
			break
		}
		next, err := a.reattach()
		if err != nil {
			a.err = err
			a.cmu.Lock()
			a.suspended = false // the input's wait ends: on a closed connection
			a.resumed.Broadcast()
			a.cmu.Unlock()
			break
		}
		conn = next
	}
	pw.CloseWithError(a.err) // nil: Read returns io.EOF
}

// Read reads the process's output; io.EOF once it has ended and all its
// output is read. Output not read holds the stream back (and the agent,
// past its ring, skips what is overwritten: see Wait's Missed).
func (a *ProcAttachment) Read(p []byte) (int, error) { return a.out.Read(p) }

// Write sends p as the process's input.
func (a *ProcAttachment) Write(p []byte) (int, error) {
	for n := 0; n < len(p); {
		k := min(len(p)-n, 32<<10)
		if err := a.send(frameStdin, p[n:n+k]); err != nil {
			return n, err
		}
		n += k
	}
	return len(p), nil
}

// CloseWrite ends the process's input (see ProcStdin's eof).
func (a *ProcAttachment) CloseWrite() error { return a.send(frameEOF, nil) }

// Resize sets the size of the process's tty.
func (a *ProcAttachment) Resize(rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return errdefs.Invalid("resize: a terminal of %d x %d", rows, cols)
	}
	var b [4]byte
	binary.BigEndian.PutUint16(b[:], rows)
	binary.BigEndian.PutUint16(b[2:], cols)
	return a.send(frameResize, b[:])
}

func (a *ProcAttachment) send(kind byte, p []byte) error {
	if a.readOnly {
		return errdefs.Precondition("a read-only attachment takes no input")
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.cmu.Lock()
	for a.suspended {
		a.resumed.Wait()
	}
	conn := a.conn
	a.cmu.Unlock()
	if err := writeFrame(conn, kind, p); err != nil {
		return a.c.lost("send to the process", err)
	}
	return nil
}

// Wait waits for the end of the attachment, once its output is read to
// the end (or after Close), and returns where it ended: the process as
// it ended, the offset to reattach from (Next) and what was missed. Its
// error is an ErrTakenOver when another writer took over, an
// ErrUnavailable when the connection failed.
func (a *ProcAttachment) Wait() (ProcOutputResult, error) {
	<-a.done
	return a.res, a.err
}

// closeWait bounds how long Close waits for the agent to let go of an
// attachment.
const closeWait = 2 * time.Second

// Close ends the attachment; the process goes on. Once Close returns, the
// agent has let go of the attachment (within closeWait): its place as the
// process's writer is free for another. The connection's end of input
// tells the agent, which frees the place and then ends the connection.
func (a *ProcAttachment) Close() error {
	var err error
	a.closed.Do(func() {
		a.closing.Store(true)
		a.cancel()
		a.out.Close()
		a.cmu.Lock()
		conn, suspended := a.conn, a.suspended
		a.cmu.Unlock()
		if cw, ok := conn.(interface{ CloseWrite() error }); ok && (suspended || cw.CloseWrite() == nil) {
			select {
			case <-a.done:
			case <-time.After(closeWait):
			}
		}
		a.cmu.Lock()
		conn = a.conn // a new one, if it attached again meanwhile
		a.cmu.Unlock()
		if err = conn.Close(); errors.Is(err, net.ErrClosed) {
			err = nil // the end of the output closed it
		}
	})
	return err
}

// procPath is the path of the process id's endpoint sub ("" for the
// process itself).
func procPath(id, sub string) string {
	p := "/v1/procs/" + url.PathEscape(id)
	if sub != "" {
		p += "/" + sub
	}
	return p
}
