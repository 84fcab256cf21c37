package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// errClientGone ends an attachment whose client closed its connection.
var errClientGone = errors.New("the client closed the attachment")

// attachment is one client attached to a process (GET
// /v1/procs/{id}/attach). Only the process's writer's input is taken; its
// cancel ends the attachment, with ErrTakenOver when another takes over.
type attachment struct {
	cancel context.CancelCauseFunc
	// suspended says its writer will attach again (frameSuspend).
	suspended atomic.Bool
}

// claimWriter makes a the writer of p. A writer already there keeps its
// place, unless takeover, which ends its attachment.
func (p *detachedProc) claimWriter(a *attachment, takeover bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writer != nil {
		if !takeover {
			return errdefs.WithCode(errdefs.Precondition("process %s already has a writer attached (take over to replace it)", p.id), "WRITER_ATTACHED")
		}
		p.writer.cancel(ErrTakenOver)
	}
	p.writer = a
	p.writers++
	return nil
}

// isWriter reports whether a is p's writer.
func (p *detachedProc) isWriter(a *attachment) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writer == a
}

// releaseWriter gives up a's place as writer, if it still has it.
func (p *detachedProc) releaseWriter(a *attachment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writer == a {
		p.writer = nil
	}
}

// streamOutput sends p's output from offset since through fw: an offset
// frame first and again after output it skipped (no longer held), output
// frames, and at the end of the output (follow) or of what there is now,
// the ProcInfo. It returns early when ctx is done or fw fails. A reader
// that falls behind never makes the agent hold more than the ring: the
// ring overwrites, and the reader is told where it resumes; unless the
// reader is the ring's holder (holder, nil for none), whose reads let the
// process's writes go on.
func (p *detachedProc) streamOutput(ctx context.Context, since int64, follow bool, fw *frameWriter, holder *attachment) error {
	buf := make([]byte, 32<<10)
	next := int64(-1) // the offset the client expects next
	for {
		at, stream, n, wait := p.out.read(since, buf)
		if at != next {
			var off [8]byte
			binary.BigEndian.PutUint64(off[:], uint64(at))
			if err := fw.frame(frameOffset, off[:]); err != nil {
				return err
			}
		}
		since = at + int64(n)
		next = since
		if n > 0 {
			if err := fw.frame(stream, buf[:n]); err != nil {
				return err
			}
			if holder != nil {
				p.out.advance(holder, next)
			}
			continue
		}
		if wait == nil || !follow {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	info, err := json.Marshal(p.info())
	if err != nil {
		return err
	}
	return fw.frame(frameResult, info)
}

// handleProcOutput streams a process's output (?since=N&follow=1).
func (s *Server) handleProcOutput(w http.ResponseWriter, r *http.Request) {
	p, ok := s.lookupProc(w, r)
	if !ok {
		return
	}
	since, follow, _, _, err := attachQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err)
		return
	}
	w.Header().Set("Content-Type", "application/x-agent2env-frames")
	w.WriteHeader(http.StatusOK)
	fw := &frameWriter{w: w, flush: http.NewResponseController(w).Flush}
	_ = p.streamOutput(r.Context(), since, follow, fw, nil)
}

// followStarted answers the output stream of p, just started: a
// frameStarted with its ProcInfo, then its output from its first byte and
// its end as handleProcOutput's follow gives them. The stream holds p's
// writer place, as an attachment does, but takes no input (that goes
// through POST /v1/procs/{id}/stdin): with flow control, p's output
// waits for it rather than overwrite what it has not sent, until the
// client leaves (the end of r's context), which ends the stream and not
// the process; a takeover ends it with frameTakenOver.
func (s *Server) followStarted(w http.ResponseWriter, r *http.Request, p *detachedProc) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	a := &attachment{cancel: cancel}
	if err := p.claimWriter(a, false); err != nil {
		s.procs.remove(p) // nobody follows it: it must not wait for one
		writeProcError(w, err)
		return
	}
	defer p.releaseWriter(a)
	var holder *attachment
	if p.flow {
		holder = a
		p.out.hold(a, 0)
		defer p.out.release(a)
	}
	w.Header().Set("Content-Type", "application/x-agent2env-frames")
	w.WriteHeader(http.StatusCreated)
	fw := &frameWriter{w: w, flush: http.NewResponseController(w).Flush}
	info, err := json.Marshal(p.info())
	if err == nil {
		err = fw.frame(frameStarted, info)
	}
	if err == nil {
		err = p.streamOutput(ctx, 0, true, fw, holder)
	}
	if errors.Is(err, ErrTakenOver) {
		_ = fw.frame(frameTakenOver, []byte(ErrTakenOver.Error()))
	}
}

// handleProcAttach turns the request's connection into a two-way stream
// of frames with a process (?since=N&readonly=1&takeover=1): its output
// from offset since, then its ProcInfo, one way; input, resizes and the
// end of input the other, taken from the writer only.
func (s *Server) handleProcAttach(w http.ResponseWriter, r *http.Request) {
	p, ok := s.lookupProc(w, r)
	if !ok {
		return
	}
	since, _, readOnly, takeover, err := attachQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err)
		return
	}
	if !upgrading(w, r, procProtocol) {
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	a := &attachment{cancel: cancel}
	if !readOnly {
		if err := p.claimWriter(a, takeover); err != nil {
			writeProcError(w, err)
			return
		}
	}
	conn, err := switchProtocols(w, procProtocol)
	if err != nil {
		p.releaseWriter(a)
		return
	}
	defer conn.Close()
	fw := &frameWriter{w: conn, flush: func() error { return nil }}
	s.serveAttachment(ctx, p, a, !readOnly, since, conn, fw, func() { conn.Close() })
}

// serveAttachment serves attachment a to p, its writer's when writer is
// set (a has claimed the place): p's output from offset since goes
// through fw, to its end and its ProcInfo, while a's frames come from
// in (applied when a is the writer) until in ends, which ctx's cancel,
// a's, is told. Once the output has ended, hangUp, when not nil, ends the
// exchange (an upgraded connection, which the client's end of input
// need not wait for; an exec's request ends when its client ends its
// body). The writer of a process with flow control holds its output
// from since. When the writer's attachment ends, not taken over, a
// process that ends with its writer ends, unless the attachment was
// suspended (frameSuspend: a checkpoint's, whose client attaches again):
// it then keeps the output held where the writer left it, and waits
// suspendGrace for a writer.
func (s *Server) serveAttachment(ctx context.Context, p *detachedProc, a *attachment, writer bool, since int64, in io.Reader, fw *frameWriter, hangUp func()) {
	var holder *attachment // the writer of a process with flow control
	release := func() {}
	ended := false // the writer's attachment ended, not taken over
	if writer {
		if p.flow {
			holder = a
			p.out.hold(a, since)
		}
		release = sync.OnceFunc(func() {
			switch {
			case holder == nil:
			case a.suspended.Load() && p.endWithWriter:
				// What the client has not received waits for it.
				p.out.pass(a, p)
			default:
				p.out.release(a)
			}
			ended = p.isWriter(a)
			p.releaseWriter(a)
		})
		defer release()
	}
	input := make(chan struct{})
	go func() {
		defer close(input)
		p.readInput(ctx, a, in)
		a.cancel(errClientGone)
	}()
	if err := p.streamOutput(ctx, since, true, fw, holder); errors.Is(err, ErrTakenOver) {
		_ = fw.frame(frameTakenOver, []byte(ErrTakenOver.Error()))
	}
	// The writer's place is free before the exchange ends: a client
	// that saw it end (ProcAttachment.Close waits for that) may attach
	// as the writer again at once.
	release()
	if hangUp != nil {
		hangUp()
	}
	<-input
	switch {
	case !ended || !p.endWithWriter:
	case a.suspended.Load():
		// A checkpoint's: its writer attaches again, or after the grace
		// the process ends as if it had not.
		seq := p.writerSeq()
		time.AfterFunc(s.suspendGrace, func() {
			if p.writerSeq() == seq {
				s.procs.remove(p)
			}
		})
	default:
		s.procs.remove(p)
	}
}

// writerSeq counts the writers that have attached to p.
func (p *detachedProc) writerSeq() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writers
}

// readInput takes an attachment's frames until its connection ends,
// applying those of p's writer.
func (p *detachedProc) readInput(ctx context.Context, a *attachment, conn io.Reader) {
	r := bufio.NewReaderSize(conn, 32<<10)
	var buf []byte
	for {
		kind, b, err := readFrame(r, buf)
		if err != nil {
			return
		}
		buf = b[:0]
		if !p.isWriter(a) {
			continue // a reader's, or a writer's taken over
		}
		switch kind {
		case frameStdin:
			err = p.writeStdin(ctx, bytes.NewReader(b))
		case frameResize:
			if len(b) != 4 {
				continue
			}
			err = p.resize(binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:]))
		case frameEOF:
			err = p.closeStdin()
		case frameSuspend:
			a.suspended.Store(true)
		}
		if err != nil {
			p.log.Debug("attachment input not taken", "id", p.id, "frame", string(kind), "err", err)
		}
	}
}
