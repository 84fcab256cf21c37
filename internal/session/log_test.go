package session

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
)

// records is a slog.Handler that keeps every record as "msg k=v k=v".
type records struct {
	mu    sync.Mutex
	lines []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += fmt.Sprintf(" %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	return nil
}

func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// clear forgets the records so far.
func (r *records) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = nil
}

// find returns the first line that starts with msg and has every attr.
func (r *records) find(msg string, attrs ...string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if !strings.HasPrefix(l, msg+" ") {
			continue
		}
		ok := true
		for _, a := range attrs {
			ok = ok && strings.Contains(l+" ", " "+a)
		}
		if ok {
			return l, true
		}
	}
	return "", false
}

// TestLogs: a session's create, reuse, executions, expiry and reaping are
// each one structured log line saying which session and why.
func TestLogs(t *testing.T) {
	rec := &records{}
	e := newEnv(t, func(su *setup) { su.log = slog.New(rec) })
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "logged"})
	e.execute(t, bg, api.SessionExecuteRequest{Code: "2", SessionID: "logged"})
	e.clock.Add(31 * time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r.Idle != 1 {
		t.Fatalf("reap: %+v %v", r, err)
	}
	for _, want := range [][]string{
		{"session created", "session=logged ", "flavor=small "},
		{"session reused", "session=logged "},
		{"execution", "session=logged ", "language=python ", "outcome=ok ", "duration="},
		{"session removed", "session=logged ", "reason=idle"},
		{"reaped", "idle_sessions=1 "},
	} {
		if _, ok := rec.find(want[0], want[1:]...); !ok {
			t.Errorf("no log line %q with %q in:\n%s", want[0], want[1:], strings.Join(rec.lines, "\n"))
		}
	}
}
