package session

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// A session's commands and code keep their output within the daemon's
// output budget, as /exec does: it counts until the response is released,
// and past the sandbox's share the output is cut and the response says
// truncated. What a command streams to a sink is not cut by the budget.
func TestOutputBudget(t *testing.T) {
	const budget, each = 1 << 20, 1_000_000 // one sandbox's buffers grow to 384 KiB
	e := newEnv(t, func(su *setup) { su.mgr.OutputBudget = budget })
	outputs := e.M.OutputBudget()
	var mu sync.Mutex
	var streamed strings.Builder
	tests := []struct {
		name string
		run  func() (stdout string, truncated bool, release func(), err error)
	}{
		{"command", func() (string, bool, func(), error) {
			r, release, err := e.svc.ExecuteCommand(bg, api.SessionCommandRequest{SessionID: "budget",
				Command: api.CommandLine{Shell: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", each)}}, collect{mu: &mu, b: &streamed})
			if err != nil {
				return "", false, nil, err
			}
			if streamed.String() != strings.Repeat("x", each) {
				t.Errorf("streamed %d bytes, want %d", streamed.Len(), each)
			}
			return r.Stdout, r.Truncated, release, nil
		}},
		{"code", func() (string, bool, func(), error) {
			r, release, err := e.svc.ExecuteCode(bg, api.SessionExecuteRequest{SessionID: "budget",
				Code: fmt.Sprintf("import sys\nsys.stdout.write('x' * %d)", each)}, nil)
			if err != nil {
				return "", false, nil, err
			}
			return r.Output.Stdout, r.Truncated, release, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, truncated, release, err := tt.run()
			if err != nil {
				t.Fatal(err)
			}
			kept, _, _ := strings.Cut(stdout, "\n[output truncated: ")
			if !truncated || len(kept) >= each || strings.Trim(kept, "x") != "" {
				t.Errorf("kept %d bytes of %d, truncated %v, want a prefix cut by the budget", len(kept), each, truncated)
			}
			if in := outputs.InUse(); in < int64(len(stdout)) || outputs.Peak() > budget {
				t.Errorf("budget holds %d (peak %d of %d) for %d bytes of output", in, outputs.Peak(), budget, len(stdout))
			}
			release()
			if in := outputs.InUse(); in != 0 {
				t.Errorf("budget in use after release: %d", in)
			}
		})
	}
}
