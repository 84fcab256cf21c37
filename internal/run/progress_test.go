package run

import (
	"testing"

	"github.com/agent2env/agent2env/internal/llm/caller"
)

// A call on a sandbox's channel is its sandbox's run's progress, whatever
// run it names; one with a per-run key is that run's.
func TestProgress(t *testing.T) {
	tests := []struct {
		name    string
		c       caller.Caller
		touched string // the job touched: "a", "b" or ""
	}{
		{"sandbox's channel", caller.Caller{Sandbox: "sb-a", Run: "b"}, "a"},
		{"per-run key", caller.Caller{Run: "b"}, "b"},
		{"unknown sandbox", caller.Caller{Sandbox: "sb-x", Run: "b"}, ""},
		{"nobody's", caller.Caller{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs := map[string]*job{"a": {id: "a"}, "b": {id: "b"}}
			s := &Service{jobs: jobs, bySandbox: map[string]string{"sb-a": "a"}}
			s.Progress(tt.c)
			for id, j := range jobs {
				if got := j.last.Load() != 0; got != (id == tt.touched) {
					t.Errorf("job %s touched = %v", id, got)
				}
			}
		})
	}
}
