package run

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

func nowNanos() int64 { return time.Now().UnixNano() }

// The files of a run's directory.
const (
	eventsFile    = "events.jsonl"
	outputFile    = "output.log"
	resultFile    = "result.json"
	artifactsDir  = "artifacts"
	maxEventBytes = 64 << 10 // an event's text beyond this is cut
)

// eventLog is a run's event log (JSON lines) and output log, appended to
// while the run goes and followed by readers. It is safe for concurrent
// use.
type eventLog struct {
	limit int64

	mu      sync.Mutex
	events  *os.File
	out     *os.File
	seq     int64
	size    int64 // bytes written to events
	outSize int64
	phase   string
	// changed is closed, and replaced, at each append and at the end.
	changed chan struct{}
	ended   bool
	// publish, when set, tells the store's other daemons of each event
	// added.
	publish func(api.RunEvent)
}

// openLog opens (creating) the logs of run id for appending and makes
// them the run's live log.
func (s *Service) openLog(id string) (*eventLog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.logs[id]; l != nil {
		return l, nil
	}
	dir := s.runDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open the logs of run %s: %w", id, err)
	}
	ev, err := os.OpenFile(filepath.Join(dir, eventsFile), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the logs of run %s: %w", id, err)
	}
	out, err := os.OpenFile(filepath.Join(dir, outputFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		ev.Close()
		return nil, fmt.Errorf("open the logs of run %s: %w", id, err)
	}
	l := &eventLog{limit: s.cfg.OutputLimit, events: ev, out: out, changed: make(chan struct{})}
	if s.notes != nil {
		l.publish = func(ev api.RunEvent) { s.publish(id, ev) }
	}
	// A log a previous daemon wrote continues its numbering.
	if data, err := io.ReadAll(ev); err == nil {
		l.seq, l.size = int64(bytes.Count(data, []byte("\n"))), int64(len(data))
	}
	if fi, err := out.Stat(); err == nil {
		l.outSize = fi.Size()
	}
	s.logs[id] = l
	return l, nil
}

// add appends ev, numbered and timed. Output and agent events past the
// log's limit are dropped; phase, liveness and end events never are.
func (l *eventLog) add(ev api.RunEvent) {
	if len(ev.Text) > maxEventBytes {
		ev.Text = ev.Text[:maxEventBytes] + "…"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if ev.Type == api.RunEventPhase {
		l.phase = ev.Phase
	}
	if ev.Phase == "" {
		ev.Phase = l.phase
	}
	if (ev.Type == api.RunEventOutput || ev.Type == api.RunEventAgent) && l.size > l.limit {
		return
	}
	l.seq++
	ev.Seq, ev.Time = l.seq, time.Now().UTC()
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	b = append(b, '\n')
	if n, err := l.events.Write(b); err == nil {
		l.size += int64(n)
	}
	if l.publish != nil {
		l.publish(ev)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// output appends a line of output to the output log, within its limit.
func (l *eventLog) output(stream string, line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || l.outSize > l.limit {
		return
	}
	n, _ := l.out.Write(outputLine(stream, line))
	l.outSize += int64(n)
}

// outputLine is how output puts a line in the output log.
func outputLine(stream string, line []byte) []byte {
	if stream == "stderr" {
		return append([]byte("[stderr] "+string(line)), '\n')
	}
	return append(append([]byte(nil), line...), '\n')
}

// outputSize is the output log's size now.
func (l *eventLog) outputSize() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outSize
}

// end appends the end event and closes the files.
func (l *eventLog) end(status api.RunStatus, reason string) {
	l.add(api.RunEvent{Type: api.RunEventEnd, Phase: api.PhaseDone, Status: status, Reason: reason})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.ended = true
	l.events.Close()
	l.out.Close()
	close(l.changed)
}

// endLog ends run id's live log, if it has one: its end event is written
// before the log stops being live, so that a follower who finds no live
// log finds the end in the file.
func (s *Service) endLog(id string, status api.RunStatus, reason string) {
	s.mu.Lock()
	l := s.logs[id]
	s.mu.Unlock()
	if l == nil {
		return
	}
	l.end(status, reason)
	s.mu.Lock()
	if s.logs[id] == l {
		delete(s.logs, id)
	}
	s.mu.Unlock()
}

// Follow passes each event of run id's log numbered after after (0: from
// its start) to fn, oldest first, then those that follow as they are
// added, until the run's end event (which it passes too), ctx ends or fn
// fails. A run that ended has the rest of its log passed at once; one
// whose end event is numbered after or below ends with nothing passed.
// Another tenant's run is ErrNotFound.
func (s *Service) Follow(ctx context.Context, id string, after int64, fn func(api.RunEvent) error) error {
	if _, err := s.get(ctx, id); err != nil {
		return err
	}
	// A queued run has no log yet, nor one just starting: wait for its
	// log, or its end. A run left active by a previous daemon has its log
	// once this one's recovery takes it up.
	var live *eventLog
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		s.mu.Lock()
		live = s.logs[id]
		s.mu.Unlock()
		if live != nil {
			break
		}
		r, err := s.store.GetRun(ctx, id)
		if err != nil {
			return runErr(err, id)
		}
		if final(r.Status) {
			break
		}
		if s.notes != nil && r.ClaimedBy != "" && r.ClaimedBy != s.cfg.Owner {
			return s.followElsewhere(ctx, id, after, fn)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	f, err := os.Open(filepath.Join(s.runDir(id), eventsFile))
	if errors.Is(err, os.ErrNotExist) {
		// A run that ended before it had a log (cancelled while queued)
		// still ends its stream.
		r, err := s.store.GetRun(ctx, id)
		if err != nil {
			return runErr(err, id)
		}
		if final(r.Status) && after < 1 {
			return fn(endEvent(r, 1))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the events of run %s: %w", id, err)
	}
	defer f.Close()
	if after > 0 {
		if err := seekAfter(f, after); err != nil {
			return fmt.Errorf("read the events of run %s: %w", id, err)
		}
	}
	r := bufio.NewReader(f)
	var partial []byte
	for {
		var changed chan struct{}
		var ended bool
		if live != nil {
			live.mu.Lock()
			changed, ended = live.changed, live.ended
			live.mu.Unlock()
		}
		// Read what is there now; a line still being written waits in
		// partial.
		for {
			line, err := r.ReadBytes('\n')
			partial = append(partial, line...)
			if err != nil {
				break
			}
			var ev api.RunEvent
			if seq, ok := lineSeq(partial); (!ok || seq > after) && json.Unmarshal(partial, &ev) == nil && ev.Seq > after {
				if err := fn(ev); err != nil {
					return err
				}
				if ev.Type == api.RunEventEnd {
					return nil
				}
			}
			partial = partial[:0]
		}
		if live == nil || ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// seqPrefix starts each line of an event log: api.RunEvent's first field
// is its number.
const seqPrefix = `{"seq":`

// lineSeq returns the number of the event on line, read from its start
// without decoding the rest; false when the line does not start as an
// event does (a line a killed daemon left cut).
func lineSeq(line []byte) (int64, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(seqPrefix))
	if !ok {
		return 0, false
	}
	n := 0
	for n < len(rest) && n < 19 && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n == len(rest) || (rest[n] != ',' && rest[n] != '}') {
		return 0, false
	}
	seq, err := strconv.ParseInt(string(rest[:n]), 10, 64)
	return seq, err == nil
}

// seekScan is the stretch of an event log below which seekAfter reads on
// line by line rather than halving it again.
const seekScan = 64 << 10

// seekAfter moves f, an event log, to the start of a line before which
// every event is numbered after or below: near the first event after
// after, found by halving the log (its events are in order), so that a
// follow resumed deep into a long log does not read it all. The lines
// from there on may still hold events numbered after or below; Follow
// skips them.
func seekAfter(f *os.File, after int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// lo is always a line's start with only events numbered after or
	// below before it.
	lo, hi := int64(0), fi.Size()
	for hi-lo > seekScan {
		mid := lo + (hi-lo)/2
		start, seq, ok, err := lineFrom(f, mid, hi)
		if err != nil {
			return err
		}
		if ok && seq <= after {
			lo = start
		} else {
			hi = mid
		}
	}
	_, err = f.Seek(lo, io.SeekStart)
	return err
}

// lineFrom finds the first line of f that starts at or after at (> 0)
// and before end, and returns its start and its event's number; ok is
// false when there is no such line or it does not start as an event
// does.
func lineFrom(f io.ReaderAt, at, end int64) (start, seq int64, ok bool, err error) {
	br := bufio.NewReaderSize(io.NewSectionReader(f, at-1, end-at+1), 4096)
	start = at - 1
	for {
		b, err := br.ReadSlice('\n')
		start += int64(len(b))
		if errors.Is(err, io.EOF) {
			return 0, 0, false, nil
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return 0, 0, false, err
		}
	}
	head, err := br.Peek(len(seqPrefix) + 20)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, false, err
	}
	seq, ok = lineSeq(head)
	return start, seq, ok, nil
}

// endEvent is the end event, numbered seq, of r, which ended.
func endEvent(r *store.Run, seq int64) api.RunEvent {
	return api.RunEvent{Seq: seq, Time: r.UpdatedAt, Type: api.RunEventEnd, Phase: api.PhaseDone,
		Status: api.RunStatus(r.Status), Reason: r.Reason}
}

// Logs opens run id's output log (stdout lines, stderr lines marked
// "[stderr] "); the caller closes it. Another tenant's run is
// ErrNotFound.
func (s *Service) Logs(ctx context.Context, id string) (io.ReadCloser, error) {
	if _, err := s.get(ctx, id); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(s.runDir(id), outputFile))
	if errors.Is(err, os.ErrNotExist) {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if err != nil {
		return nil, errdefs.Unavailable("read the output of run %s: %v", id, err)
	}
	return f, nil
}
