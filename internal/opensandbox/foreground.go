package opensandbox

import (
	"sync"
	"time"
)

// Stock execd keeps every command it runs for its life, a foreground
// command's status too; a daemon serves many sandboxes for much longer,
// so it keeps the status of its foregroundKept most recent ended
// foreground commands, with at most foregroundKeptText bytes of their
// command text (a command may be as long as a body, 1 MiB), in memory.
var (
	foregroundKept     = 1024
	foregroundKeptText = 16 << 20
)

// foregrounds are the foreground commands this handler ran, by the id
// of their init event, for GET /command/status/{id}: each while it runs
// and, once ended, while it is among the most recent (foregroundKept).
// Their output is not kept: stock execd's logs route refuses a
// foreground command (400).
type foregrounds struct {
	mu sync.Mutex
	m  map[string]*foreground
	// ended are the ids of the ended ones, oldest first, and text the
	// bytes of their command text.
	ended []string
	text  int
}

type foreground struct {
	sandbox string
	status  commandStatus
}

// start records st, a command of sandbox that has started.
func (f *foregrounds) start(sandbox string, st commandStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*foreground{}
	}
	f.m[st.ID] = &foreground{sandbox: sandbox, status: st}
}

// end records that command id ended at with exit code code and errText
// ("" for none), and forgets the oldest ended ones beyond the bounds.
func (f *foregrounds) end(id string, code int, errText string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.m[id]
	if !ok || !c.status.Running {
		return
	}
	c.status.Running, c.status.ExitCode, c.status.Error, c.status.FinishedAt = false, &code, errText, &at
	f.ended = append(f.ended, id)
	f.text += len(c.status.Content)
	for len(f.ended) > foregroundKept || (f.text > foregroundKeptText && len(f.ended) > 0) {
		old := f.ended[0]
		f.ended = f.ended[1:]
		f.text -= len(f.m[old].status.Content)
		delete(f.m, old)
	}
}

// get returns the status of command id of sandbox, and whether it is
// known.
func (f *foregrounds) get(sandbox, id string) (commandStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.m[id]
	if !ok || c.sandbox != sandbox {
		return commandStatus{}, false
	}
	return c.status, true
}
