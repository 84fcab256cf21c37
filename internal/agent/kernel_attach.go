package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// An execution started by attachment (POST /v1/kernels/{id}/execute/attach)
// runs apart from the request that started it, as a kernelRun: its frames
// (output, displays) go to the attachment, or wait in the run while there
// is none, and its result is sent last. The request is full duplex: its
// body is the KernelExecRequest as a JSON line, then input frames (only
// frameSuspend: a checkpoint's); its answer is a frameStarted with the
// run's id (KernelRunInfo), the frames, the result. An attachment whose body ends
// after a frameSuspend lets go of the run, which holds its frames (the
// kernel's output waits past runHold) until its client attaches again
// (POST /v1/kernels/{id}/executions/{run}/attach?since=N, N the frames it
// has received) or suspendGrace has passed; one whose body ends otherwise
// (the client left) interrupts the run, as the end of a request of POST
// /v1/kernels/{id}/execute does.

// runHold bounds the bytes of frames a run holds for its client: past it
// the kernel's output waits (flow control), as it does for a client that
// reads slowly.
const runHold = 256 << 10

// KernelRunInfo names an execution started by attachment (its
// frameStarted).
type KernelRunInfo struct {
	ID string `json:"id"`
}

// errRunAbandoned is what an abandoned run's frames get: no client takes
// them.
var errRunAbandoned = errors.New("no client takes the execution's output")

// runFrame is one frame a run holds.
type runFrame struct {
	kind byte
	p    []byte
}

// kernelRun is an execution that runs apart from its attachments.
type kernelRun struct {
	id     string
	k      *kernel
	cancel context.CancelFunc // interrupts the execution

	mu sync.Mutex
	// moved is closed, and replaced, when a frame comes, frames are sent,
	// the run ends or is abandoned.
	moved  chan struct{}
	frames []runFrame // produced, not sent yet
	held   int        // their payloads' bytes
	sent   int64      // the frames sent: the offset of frames[0]
	result []byte     // the result frame's payload, once the run ended
	// attached: an attachment serves the run; attaches counts them. fw
	// is its writer, which frames go straight to when none are held
	// before them (the stream's goroutine sends those), until it ends.
	attached bool
	attaches int
	fw       *frameWriter
	// abandoned: no client comes for the output (it is dropped), and the
	// run is interrupted. delivered: its result was sent.
	abandoned, delivered bool
}

// notifyLocked wakes those waiting on r.moved; the caller holds r.mu.
func (r *kernelRun) notifyLocked() {
	close(r.moved)
	r.moved = make(chan struct{})
}

// frame sends one frame to r's client, or holds it for the client, once
// the frames held are within runHold.
func (r *kernelRun) frame(kind byte, p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sendLocked(kind, p) {
		r.sent++
		return nil
	}
	for r.held > runHold && !r.abandoned {
		wait := r.moved
		r.mu.Unlock()
		<-wait
		r.mu.Lock()
	}
	if r.abandoned {
		return errRunAbandoned
	}
	r.frames = append(r.frames, runFrame{kind: kind, p: bytes.Clone(p)})
	r.held += len(p)
	r.notifyLocked()
	return nil
}

// sendLocked sends a frame straight to the attached client, when there is
// one and no frames are held before it, and reports whether it did; the
// caller holds r.mu. A frame that fails is held: its attachment has ended.
func (r *kernelRun) sendLocked(kind byte, p []byte) bool {
	if r.fw == nil || len(r.frames) > 0 || r.abandoned {
		return false
	}
	if err := r.fw.frame(kind, p); err != nil {
		r.fw = nil
		return false
	}
	return true
}

// finish ends r with its result's payload, sent at once when it can be.
func (r *kernelRun) finish(result []byte) {
	r.mu.Lock()
	r.result = result
	r.delivered = r.sendLocked(frameResult, result)
	r.notifyLocked()
	drop := r.abandoned || r.delivered
	r.mu.Unlock()
	if drop {
		r.k.dropRun(r)
	}
}

// abandon interrupts r and drops its output: no client takes it.
func (r *kernelRun) abandon() {
	r.mu.Lock()
	first := !r.abandoned && !r.delivered
	r.abandoned = true
	ended := r.result != nil
	r.notifyLocked()
	r.mu.Unlock()
	r.cancel()
	if first && ended {
		r.k.dropRun(r)
	}
}

// errRunAttached and errRunGone are why an attachment to a run is refused
// (and runOffsetError).
var (
	errRunAttached = errors.New("the execution already has a client attached")
	errRunGone     = errors.New("execution not found")
)

// attach makes a client, which has received since frames, r's attachment.
func (r *kernelRun) attach(since int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.abandoned || r.delivered:
		return fmt.Errorf("execution %s: %w", r.id, errRunGone)
	case r.attached:
		return fmt.Errorf("execution %s: %w", r.id, errRunAttached)
	case since != r.sent:
		return &runOffsetError{id: r.id, since: since, sent: r.sent}
	}
	r.attached = true
	r.attaches++
	return nil
}

// runOffsetError is an attachment from an offset the run does not hold.
type runOffsetError struct {
	id          string
	since, sent int64
}

func (e *runOffsetError) Error() string {
	return fmt.Sprintf("execution %s holds its output from frame %d, not %d", e.id, e.sent, e.since)
}

// detach ends r's attachment: a suspended one's client comes back within
// grace, or r is abandoned then; another's has left, and r is abandoned
// now.
func (r *kernelRun) detach(suspended bool, grace time.Duration) {
	r.mu.Lock()
	r.attached, r.fw = false, nil
	seq := r.attaches
	r.mu.Unlock()
	if !suspended {
		r.abandon()
		return
	}
	time.AfterFunc(grace, func() {
		r.mu.Lock()
		again := r.attaches != seq
		r.mu.Unlock()
		if !again {
			r.abandon()
		}
	})
}

// stream serves r through fw: the frames held for the client, after which
// they go straight to fw (frame), and the result, until it is sent, ctx
// ends (the attachment's input has ended) or fw fails. A frame is dropped
// once sent: a client that attaches again asks for those after it.
func (r *kernelRun) stream(ctx context.Context, fw *frameWriter) error {
	r.mu.Lock()
	r.fw = fw
	r.mu.Unlock()
	for {
		r.mu.Lock()
		batch, result, delivered, wait := r.frames, r.result, r.delivered, r.moved
		r.mu.Unlock()
		if delivered {
			return nil
		}
		for i, f := range batch {
			if err := fw.frame(f.kind, f.p); err != nil {
				r.advance(i)
				return err
			}
		}
		if len(batch) > 0 {
			r.advance(len(batch))
			continue
		}
		if result != nil {
			r.mu.Lock()
			sent := r.delivered || r.sendLocked(frameResult, result)
			r.delivered = sent
			r.mu.Unlock()
			if !sent {
				return errors.New("the execution's result was not sent")
			}
			r.k.dropRun(r)
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// advance drops the first n frames r holds, which were sent.
func (r *kernelRun) advance(n int) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.frames[:n] {
		r.held -= len(f.p)
	}
	clear(r.frames[:n]) // their payloads go now, not with the array
	r.frames = r.frames[n:]
	r.sent += int64(n)
	r.notifyLocked()
}

// dropRun forgets r.
func (k *kernel) dropRun(r *kernelRun) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.runs[r.id] == r {
		delete(k.runs, r.id)
	}
}

// lookupRun returns k's run id, or nil.
func (k *kernel) lookupRun(id string) *kernelRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.runs[id]
}

// startRun starts req in k as a run, which its first attachment serves.
func (ks *kernels) startRun(k *kernel, req KernelExecRequest) *kernelRun {
	var b [12]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	r := &kernelRun{id: hex.EncodeToString(b[:]), k: k, cancel: cancel, moved: make(chan struct{}),
		attached: true, attaches: 1}
	k.mu.Lock()
	if k.runs == nil {
		k.runs = make(map[string]*kernelRun)
	}
	k.runs[r.id] = r
	k.mu.Unlock()
	ks.srv.track(1)
	go func() {
		defer ks.srv.track(-1)
		defer cancel()
		r.finish(kernelResultFrame(ks.execute(ctx, k, req, r)))
	}()
	return r
}

// kernelResultFrame is the payload of the result frame of an execution
// that ended with res and err.
func kernelResultFrame(res KernelResult, err error) []byte {
	if err != nil {
		res.Error = &KernelError{Name: "KernelDied", Kind: KindSystem, Value: err.Error()}
	}
	b, _ := json.Marshal(res)
	return b
}

// abandonDetached abandons every run no client is attached to: in a
// restored sandbox, the copies of those a checkpoint suspended, whose
// clients are the original sandbox's. They are interrupted, the kernels
// keeping what they had done.
func (ks *kernels) abandonDetached() {
	ks.mu.Lock()
	var all []*kernelRun
	for _, k := range ks.m {
		k.mu.Lock()
		for _, r := range k.runs {
			all = append(all, r)
		}
		k.mu.Unlock()
	}
	ks.mu.Unlock()
	for _, r := range all {
		r.mu.Lock()
		detached := !r.attached
		r.mu.Unlock()
		if detached {
			r.abandon()
		}
	}
}

// fullDuplex readies w to answer while r's body is still read, as the
// attachments' requests are. It answers the error and returns false when
// it cannot. The Connection: close it sets ends the connection with an
// error answer; the caller deletes it before a 200.
func fullDuplex(w http.ResponseWriter) (*http.ResponseController, bool) {
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL", err)
		return nil, false
	}
	// With full duplex, a body left unread must be closed before the
	// handler returns, or the server panics reading its end while it
	// parses the next request on the connection (golang/go#68560). Its
	// close waits for the client to end the body, which it does once it
	// has read the answer: an error answer ends the connection instead.
	w.Header().Set("Connection", "close")
	return rc, true
}

// handleKernelExecuteAttach starts an execution as a run and serves it to
// its first attachment.
func (s *Server) handleKernelExecuteAttach(w http.ResponseWriter, r *http.Request) {
	rc, ok := fullDuplex(w)
	if !ok {
		return
	}
	body := bufio.NewReaderSize(r.Body, 64<<10)
	line, err := readLine(body, maxKernelRequest)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("read execute request: %w", err))
		return
	}
	var req KernelExecRequest
	if err := json.Unmarshal(line, &req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("decode execute request: %w", err))
		return
	}
	k, ok := s.executionKernel(w, r, &req)
	if !ok {
		return
	}
	run := s.kernels.startRun(k, req)
	fw := answerFrames(w, rc)
	defer r.Body.Close()
	// Not flushed: it goes with the first frame, or the answer's end,
	// which a suspension brings (the client needs the id only then).
	started, _ := json.Marshal(KernelRunInfo{ID: run.id})
	_ = writeFrame(w, frameStarted, started) // a failure ends the stream too
	s.serveRun(run, body, fw)
}

// handleKernelAttach attaches again to a run a checkpoint suspended
// (?since=N: the frames its client has received).
func (s *Server) handleKernelAttach(w http.ResponseWriter, r *http.Request) {
	rc, ok := fullDuplex(w)
	if !ok {
		return
	}
	since, err := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	if err != nil || since < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Errorf("since must be a frame count, not %q", r.URL.Query().Get("since")))
		return
	}
	k, err := s.kernels.get(r.PathValue("id"))
	if err != nil {
		writeKernelError(w, err)
		return
	}
	run := k.lookupRun(r.PathValue("run"))
	if run == nil {
		writeError(w, http.StatusNotFound, "EXECUTION_NOT_FOUND", fmt.Errorf("execution %s: %w", r.PathValue("run"), errRunGone))
		return
	}
	if err := run.attach(since); err != nil {
		var off *runOffsetError
		switch {
		case errors.Is(err, errRunGone):
			writeError(w, http.StatusNotFound, "EXECUTION_NOT_FOUND", err)
		case errors.As(err, &off):
			writeError(w, http.StatusPreconditionFailed, "OUTPUT_NOT_HELD", err)
		default:
			writeError(w, http.StatusConflict, "ALREADY_ATTACHED", err)
		}
		return
	}
	fw := answerFrames(w, rc)
	defer r.Body.Close()
	s.serveRun(run, bufio.NewReaderSize(r.Body, 4<<10), fw)
}

// answerFrames answers 200 with a frame stream (its connection kept), and
// returns its writer.
func answerFrames(w http.ResponseWriter, rc *http.ResponseController) *frameWriter {
	w.Header().Del("Connection")
	w.Header().Set("Content-Type", "application/x-agent2env-frames")
	w.WriteHeader(http.StatusOK)
	return &frameWriter{w: w, flush: rc.Flush}
}

// serveRun serves run, attached, through fw until its result is sent or
// the attachment's input (in) ends, and then lets go of it: suspended
// when the input said so (frameSuspend), abandoned otherwise.
func (s *Server) serveRun(run *kernelRun, in io.Reader, fw *frameWriter) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	input := make(chan bool, 1)
	go func() {
		suspended := false
		var buf []byte
		for {
			kind, b, err := readFrame(in, buf)
			if err != nil {
				break
			}
			buf = b[:0]
			suspended = suspended || kind == frameSuspend
		}
		stop()
		input <- suspended
	}()
	_ = run.stream(ctx, fw)
	run.detach(<-input, s.suspendGrace)
}
