package manager

import (
	"context"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
)

// A one-shot terminal's process ends with its attachment, even when the
// daemon never asks the agent to end it (the sandbox was paused when its
// client left, or the daemon died): it does not run on, attached to no
// one, until its sandbox ends. A persistent terminal goes on.
func TestTerminalEndsWithItsAttachment(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.running(t)
	ctx := context.Background()
	discard := func(byte, int64, []byte) error { return nil }
	term, err := e.m.StartTerminal(ctx, id, TerminalRequest{Command: []string{"sleep", "60"}}, discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.CreateTerminal(ctx, id, PersistentTerminalRequest{Name: "kept", Command: []string{"sleep", "60"}}); err != nil {
		t.Fatal(err)
	}
	kept, err := e.m.AttachTerminal(ctx, id, "kept", agent.AttachOptions{Output: discard})
	if err != nil {
		t.Fatal(err)
	}
	// The attachments end, and nothing else: no DELETE of the process.
	term.ProcAttachment.Close()
	kept.Close()
	ac, err := e.m.Agent(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := ac.Proc(ctx, term.id)
		if err != nil || !info.Running {
			break // ended, and forgotten
		}
		if time.Now().After(deadline) {
			t.Fatalf("the one-shot terminal's process runs on 10 s after its attachment ended: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info, err := e.m.Terminal(ctx, id, "kept"); err != nil || !info.Running {
		t.Errorf("persistent terminal after its attachment ended: %+v, %v; want running", info, err)
	}
}
