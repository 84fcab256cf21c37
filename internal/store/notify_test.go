package store

import (
	"context"
	"testing"
)

// A local notifier delivers to the topic's listeners in the process, and
// closes a listener's channel with its context.
func TestLocalNotifier(t *testing.T) {
	var n LocalNotifier
	ctx, cancel := context.WithCancel(context.Background())
	run, _ := n.Listen(ctx, "run")
	other, _ := n.Listen(context.Background(), "session")
	if err := n.Notify(ctx, "run", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if p := <-run; string(p) != "one" {
		t.Errorf("received %q", p)
	}
	select {
	case p := <-other:
		t.Errorf("another topic received %q", p)
	default:
	}
	// A full listener loses what does not fit; the sender never waits.
	for range NotifyBuffer + 1 {
		n.Notify(ctx, "run", []byte("x"))
	}
	if len(run) != NotifyBuffer {
		t.Errorf("%d queued, want %d", len(run), NotifyBuffer)
	}
	cancel()
	for range run {
	}
}
