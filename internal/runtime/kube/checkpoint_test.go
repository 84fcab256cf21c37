package kube

import (
	"testing"

	"github.com/agent2env/agent2env/internal/sandbox"
)

// The kubernetes runtime has no snapshots (see the package doc): it says
// so in its capabilities and is no sandbox.Checkpointer, so the manager
// answers snapshots and forks with 501 naming why.
func TestNoCheckpoints(t *testing.T) {
	var rt sandbox.Runtime = &Runtime{}
	if rt.Capabilities().Checkpoint {
		t.Error("the kubernetes runtime claims Checkpoint")
	}
	if _, ok := rt.(sandbox.Checkpointer); ok {
		t.Error("the kubernetes runtime is a sandbox.Checkpointer")
	}
	if rt.Capabilities().LocalFiles {
		t.Error("the kubernetes runtime claims LocalFiles: the manager's 501 would not say its sandboxes run on other machines")
	}
}
