package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agents"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store"
)

// A run survives its daemon's restart in its agent and check phases: the
// agent runs as a detached process of the sandbox's agent (agentTag),
// which goes on without a daemon, and the runner keeps, in the run's
// directory, what the next daemon needs to follow it again from where it
// stopped reading (resumeFile). Earlier phases are short and end the run
// failed (ReasonRestarted), as before.

// agentTag names the agent's process in its run's sandbox, which is the
// run's alone: the next daemon finds it by this name.
const agentTag = "task-agent"

// agentOutputKept is how much of the agent's output its sandbox keeps
// unread: what the agent may write while no daemon reads it (a restart)
// before some is lost. The memory is the sandbox's, and taken only as
// the output comes.
var agentOutputKept = 16 << 20 // a variable for tests

// resumeFile is the state a daemon leaves of a run in its agent or
// check phase (resumeState), in the run's directory.
const resumeFile = "resume.json"

// saveEvery is how long the state may lag behind the agent's output
// read: a daemon that dies (rather than stops) leaves a state up to this
// old, and the next one reads again the output read since, which it
// passes to the parser but logs only past what the log holds (again).
const saveEvery = 250 * time.Millisecond

// resumeState is what the next daemon needs to carry a run on: the phase
// it was in, when its timeout elapses, how far the agent's output was
// read (Next, with the unterminated line of each stream), and what the
// run had counted so far.
type resumeState struct {
	Phase string `json:"phase"`
	// Started says the agent's process was seen started: one not found
	// that was not is started by the next daemon.
	Started   bool               `json:"started,omitempty"`
	SandboxID string             `json:"sandbox_id"`
	Deadline  time.Time          `json:"deadline"`
	Next      int64              `json:"next"`
	Stdout    []byte             `json:"stdout,omitempty"`
	Stderr    []byte             `json:"stderr,omitempty"`
	ExitCode  *int               `json:"exit_code,omitempty"`
	Timings   map[string]float64 `json:"timings,omitempty"`
	Tail      []string           `json:"tail,omitempty"`
	LLM       api.RunLLMUsage    `json:"llm"`
	Total     *agents.Usage      `json:"total,omitempty"`
	// Logged is the output log's size when Next was read: what the log
	// holds past it, a daemon that died logged from output read after
	// its last save, which the next one reads again (agentReader.again).
	// Nil in a state written before daemons recorded it.
	Logged *int64 `json:"logged,omitempty"`
}

// save writes st, with what e has counted, as the run's resume state
// (atomically: a reader finds the old state or the new one whole).
func (e *execution) save(st resumeState) {
	st.SandboxID, st.ExitCode = e.sandboxID, e.exitCode
	logged := e.log.outputSize()
	st.Logged = &logged
	e.mu.Lock()
	st.Tail, st.LLM, st.Total = e.tail, e.llm, e.total
	st.Timings = maps.Clone(e.timings) // never nil: execute makes it
	if e.inPhase != "" {
		st.Timings[e.inPhase] += ms(time.Since(e.phaseStart))
	}
	e.mu.Unlock()
	err := writeResume(e.s.runDir(e.j.id), &st)
	if err != nil {
		e.s.log.Warn("record how far the run went", logRun, e.j.id, "err", err)
	}
}

func writeResume(dir string, st *resumeState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, resumeFile+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, resumeFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// readResume returns the resume state run r's previous daemon left, nil
// when it left none fit to carry the run on.
func (s *Service) readResume(r *store.Run) *resumeState {
	b, err := os.ReadFile(filepath.Join(s.runDir(r.ID), resumeFile))
	if err != nil {
		return nil
	}
	var st resumeState
	if err := json.Unmarshal(b, &st); err != nil {
		s.log.Warn("read how far the run went", logRun, r.ID, "err", err)
		return nil
	}
	if (st.Phase != api.PhaseAgent && st.Phase != api.PhaseCheck) || st.SandboxID == "" || st.SandboxID != r.SandboxID {
		return nil
	}
	return &st
}

// removeResume removes run id's resume state: it has ended.
func (s *Service) removeResume(id string) {
	if err := os.Remove(filepath.Join(s.runDir(id), resumeFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("remove how far the run went", logRun, id, "err", err)
	}
}

// resume carries run j on from st, the state its previous daemon left:
// its agent followed again from where that daemon stopped reading, or
// its check run again. Its timeout still counts from its sandbox's start.
func (e *execution) resume(ctx context.Context, st *resumeState) (api.RunStatus, string) {
	e.sandboxID, e.exitCode = st.SandboxID, st.ExitCode
	e.tail, e.llm, e.total = st.Tail, st.LLM, st.Total
	maps.Copy(e.timings, st.Timings)
	e.resumed = st
	e.log.add(api.RunEvent{Type: api.RunEventLiveness,
		Text: fmt.Sprintf("the daemon restarted: the run goes on in its %s phase", st.Phase)})
	tctx, cancel := context.WithDeadlineCause(ctx, st.Deadline, errTimeout)
	defer cancel()
	return e.steps(ctx, tctx, st.Phase)
}

// agentReader passes the agent's output, as the sandbox gives it, to the
// run's logs and the adapter's parser, line by line, and keeps how far it
// has read in the resume state, saveEvery after it read more.
type agentReader struct {
	e        *execution
	parser   agents.Parser
	deadline time.Time

	mu             sync.Mutex // held by output and save
	stdout, stderr *lineWriter
	next           int64
	started        bool
	pending        *time.Timer // the save to come; nil when saved
	stopped        bool        // nothing is saved any more
	// again is what the output log holds past the resume state's Logged:
	// lines a daemon that died logged after its last save, which this
	// reader reads again and does not log twice (seen).
	again []byte
}

func (e *execution) newAgentReader(adapter agents.Adapter, deadline time.Time) *agentReader {
	r := &agentReader{e: e, parser: adapter.NewParser(), deadline: deadline}
	r.stdout = newLineWriter(func(line []byte) {
		e.j.touch()
		logged := r.seen("stdout", line)
		if !logged {
			e.log.output("stdout", line)
		}
		e.events(r.parser.Line(line), logged)
	})
	r.stderr = newLineWriter(func(line []byte) {
		e.j.touch()
		if !r.seen("stderr", line) {
			e.log.output("stderr", line)
			e.log.add(api.RunEvent{Type: api.RunEventOutput, Stream: "stderr", Text: string(line)})
		}
		e.keepTail(string(line))
	})
	return r
}

// seen reports whether line, of stream, is the next of the lines the
// last daemon logged after its last save (again), and takes it off them;
// any other line ends them: the output read again differs from the log.
// Its callers hold r.mu, or read no more.
func (r *agentReader) seen(stream string, line []byte) bool {
	if len(r.again) == 0 {
		return false
	}
	l := outputLine(stream, line)
	if !bytes.HasPrefix(r.again, l) {
		r.again = nil
		return false
	}
	r.again = r.again[len(l):]
	return true
}

// loggedAfter returns the lines of run id's output log past offset
// logged (through the last line end), which a daemon that died wrote
// after it last saved the run's resume state; nil for none.
func (s *Service) loggedAfter(id string, logged *int64) []byte {
	if logged == nil {
		return nil
	}
	f, err := os.Open(filepath.Join(s.runDir(id), outputFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, *logged, math.MaxInt64-*logged))
	if err != nil {
		s.log.Warn("read the output the last daemon logged", logRun, id, "err", err)
		return nil
	}
	return b[:bytes.LastIndexByte(b, '\n')+1]
}

// output is the agent's output from offset at (service.TerminalOutput).
func (r *agentReader) output(stream byte, at int64, p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at > r.next {
		r.e.log.add(api.RunEvent{Type: api.RunEventLiveness,
			Text: fmt.Sprintf("%d bytes of the agent's output were lost: written while no daemon read them", at-r.next)})
		// The lines they cut are passed on as they are.
		r.stdout.Close()
		r.stderr.Close()
	}
	r.next = at
	w := r.stdout
	if stream == api.TerminalStreamStderr {
		w = r.stderr
	}
	_, _ = w.Write(p)
	r.next += int64(len(p))
	if r.pending == nil && !r.stopped {
		r.pending = time.AfterFunc(saveEvery, r.save)
	}
	return nil
}

// save writes the resume state of the agent phase as read so far.
func (r *agentReader) save() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = nil
	if r.stopped {
		return
	}
	r.e.save(resumeState{Phase: api.PhaseAgent, Started: r.started, Deadline: r.deadline, Next: r.next,
		Stdout: r.stdout.Pending(), Stderr: r.stderr.Pending()})
}

// startedNow records that the agent's process runs (service.ProcDetail
// is StartFollowProc's started).
func (r *agentReader) startedNow(service.ProcDetail) error {
	r.mu.Lock()
	r.started = true
	r.mu.Unlock()
	r.save()
	return nil
}

// stop ends the saves, once the read has ended; last, when set, is saved
// first: the state a daemon that stops leaves.
func (r *agentReader) stop(last bool) {
	if last {
		r.save()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.pending != nil {
		r.pending.Stop()
	}
}

// close passes on the last, unterminated lines and the parser's last
// events.
func (r *agentReader) close() {
	r.stdout.Close()
	r.stderr.Close()
	r.e.events(r.parser.Close(), false)
}

// killAgent ends the agent's process, which must not outlive its phase
// (the run was cancelled, timed out or hung), or forgets it once it has
// ended, with its output.
func (e *execution) killAgent(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := e.s.sbx.KillProc(ctx, e.sandboxID, agentTag); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		e.s.log.Debug("end the agent's process", logRun, e.j.id, "err", err)
	}
}
