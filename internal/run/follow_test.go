package run

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store"
)

// newIdleService returns a service over a real store whose loop is not
// started: the runs a test stores stay as they are.
func newIdleService(t *testing.T) (*Service, store.Store) {
	t.Helper()
	ce := contextstest.NewEnv(t, manager.Config{}, nil)
	svc, err := New(Config{Dir: filepath.Join(t.TempDir(), "runs")}, service.NewSandboxes(ce.M, ""), ce.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return svc, ce.St
}

// addRun stores run id in status st.
func addRun(t *testing.T, st store.Store, id string, status api.RunStatus) {
	t.Helper()
	now := time.Now().UTC()
	if err := st.CreateRun(bg, &store.Run{ID: id, BatchID: "b", Task: "t", Agent: "custom", Status: string(status),
		CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
}

// follow returns the seqs Follow passes of run id after after.
func follow(t *testing.T, svc *Service, id string, after int64) []int64 {
	t.Helper()
	var seqs []int64
	if err := svc.Follow(bg, id, after, func(ev api.RunEvent) error { seqs = append(seqs, ev.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	return seqs
}

// seqRange is from, from+1, ... to; nil when from > to.
func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestFollowAfter resumes the follow of a long log after an event: only
// the events numbered after it come, each once, in order; none after the
// end event's number; and the log is not read from its start to get
// there (seekAfter lands near the event).
func TestFollowAfter(t *testing.T) {
	svc, st := newIdleService(t)
	const id, n = "run-long", 12000 // the end event is n+1
	addRun(t, st, id, api.RunSucceeded)
	l, err := svc.openLog(id)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		// Events of all sizes, some past the reading buffers.
		l.add(api.RunEvent{Type: api.RunEventOutput, Stream: "stdout", Text: strings.Repeat("x", (i*37)%6000)})
	}
	svc.endLog(id, api.RunSucceeded, "")
	for _, after := range []int64{0, 2, n / 2, n - 1, n, n + 1, n + 100} {
		t.Run(fmt.Sprint(after), func(t *testing.T) {
			got := follow(t, svc, id, after)
			want := seqRange(after+1, n+1)
			if len(got) != len(want) || (len(got) > 0 && (got[0] != want[0] || got[len(got)-1] != want[len(want)-1])) {
				t.Fatalf("after %d: %d events %v…, want %d from %v", after, len(got), got[:min(3, len(got))], len(want), want[:min(1, len(want))])
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("event %d is %d, want %d", i, got[i], want[i])
				}
			}
		})
	}
	path := filepath.Join(svc.runDir(id), eventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, after := range []int64{1, n / 3, n - 1, n + 1} {
		if err := seekAfter(f, after); err != nil {
			t.Fatal(err)
		}
		at, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			t.Fatal(err)
		}
		// The next event's line, or the log's end after the last.
		next := int64(len(data))
		if i := bytes.Index(data, fmt.Appendf(nil, "\n{\"seq\":%d,", after+1)); i >= 0 {
			next = int64(i) + 1
		}
		// The log's lines are under 7 KB: seekAfter lands at a line
		// before the next event's, within the 64 KB it reads line by line
		// and a line.
		if at > next || next-at > 72<<10 {
			t.Errorf("after %d: seekAfter at %d, the next event at %d", after, at, next)
		}
	}
}

// TestFollowAfterLive resumes the follow of a run still going: the
// events after the one given come, then those added, up to the end.
func TestFollowAfterLive(t *testing.T) {
	svc, st := newIdleService(t)
	const id = "run-live"
	addRun(t, st, id, api.RunRunning)
	l, err := svc.openLog(id)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		l.add(api.RunEvent{Type: api.RunEventOutput, Text: "before"})
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	got := make(chan []int64, 1)
	started := make(chan struct{})
	go func() {
		var seqs []int64
		err := svc.Follow(ctx, id, 7, func(ev api.RunEvent) error {
			seqs = append(seqs, ev.Seq)
			if ev.Seq == 10 {
				close(started)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		got <- seqs
	}()
	<-started
	for range 3 {
		l.add(api.RunEvent{Type: api.RunEventOutput, Text: "after"})
	}
	svc.endLog(id, api.RunSucceeded, "")
	if s := <-got; fmt.Sprint(s) != fmt.Sprint(seqRange(8, 14)) {
		t.Errorf("events %v, want 8 to 14", s)
	}
}

// TestFollowAfterNoLog resumes the follow of a run cancelled while
// queued, which has no log: its end event is 1.
func TestFollowAfterNoLog(t *testing.T) {
	svc, st := newIdleService(t)
	addRun(t, st, "run-none", api.RunCancelled)
	if got := follow(t, svc, "run-none", 0); fmt.Sprint(got) != "[1]" {
		t.Errorf("from the start: %v, want [1]", got)
	}
	if got := follow(t, svc, "run-none", 1); len(got) != 0 {
		t.Errorf("after 1: %v, want none", got)
	}
}

// TestLineSeq reads an event's number from its line's start, and none
// from a line that does not start as an event does.
func TestLineSeq(t *testing.T) {
	tests := []struct {
		line string
		seq  int64
		ok   bool
	}{
		{`{"seq":1,"time":"x"}`, 1, true},
		{`{"seq":123456}`, 123456, true},
		{`{"seq":12`, 0, false},
		{`{"seq":,"time":"x"}`, 0, false},
		{`{"seq":-1,"time":"x"}`, 0, false},
		{`{"seq":99999999999999999999,"time":"x"}`, 0, false},
		{`"time":"x"}`, 0, false},
		{`{"time":"x","seq":3}`, 0, false},
		{``, 0, false},
	}
	for _, tt := range tests {
		seq, ok := lineSeq([]byte(tt.line))
		if seq != tt.seq || ok != tt.ok {
			t.Errorf("lineSeq(%q) = %d, %v; want %d, %v", tt.line, seq, ok, tt.seq, tt.ok)
		}
	}
}
