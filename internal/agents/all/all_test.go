package all

import (
	"slices"
	"testing"

	"github.com/agent2env/agent2env/internal/task"
)

// TestEveryTaskAgent checks that every agent a task file may name has an
// adapter, and no adapter is unreachable from task files.
func TestEveryTaskAgent(t *testing.T) {
	want := slices.Sorted(slices.Values(task.Agents))
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("adapters %v, task agents %v", got, want)
	}
	for _, n := range task.Agents {
		if a, ok := Get(n); !ok || a.Name() != n {
			t.Errorf("Get(%q) = %v, %v", n, a, ok)
		}
	}
}
