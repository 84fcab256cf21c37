package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// A wait on a Pod ends once the runtime is closed, whatever its context:
// the informer's handlers see nothing more, and a daemon shutting down
// must not wait for them (a failed start's deletion waited forever).
func TestWaitPodEndsAtClose(t *testing.T) {
	stopped := make(chan struct{})
	r := &Runtime{seen: map[string]*corev1.Pod{}, changed: make(chan struct{}), stopped: stopped}
	never := func(*corev1.Pod) (bool, error) { return false, nil }
	waited := make(chan error, 1)
	go func() { waited <- r.waitPod(context.Background(), "sb", never) }()
	select {
	case err := <-waited:
		t.Fatalf("waitPod returned before the close: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(stopped)
	select {
	case err := <-waited:
		if !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("waitPod after the close: %v; want ErrUnavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitPod still waits 5 s after the runtime closed")
	}
}
