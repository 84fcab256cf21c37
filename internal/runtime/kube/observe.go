package kube

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
)

var (
	_ sandbox.UsageReader = (*Runtime)(nil)
	_ sandbox.LogReader   = (*Runtime)(nil)
)

// writableDirs are the sandbox container's writable directories, its
// emptyDirs: what its disk use is made of.
var writableDirs = []string{sandbox.WorkDir, "/tmp", sandbox.HomeDir}

// Usage asks the sandbox's agent, which reads its container's cgroup and
// measures the emptyDirs: the daemon cannot read a cgroup on another node.
// A sandbox that is not running uses nothing.
func (r *Runtime) Usage(ctx context.Context, id string) (sandbox.Usage, error) {
	pod, _, err := r.lookup(id)
	if err != nil {
		return sandbox.Usage{}, fmt.Errorf("sandbox usage %s: %w", id, err)
	}
	if state, _ := podState(pod); pod == nil || state != sandbox.StateRunning {
		return sandbox.Usage{}, nil
	}
	c, err := r.Agent(ctx, id)
	if err != nil {
		return sandbox.Usage{}, fmt.Errorf("sandbox usage %s: %w", id, err)
	}
	u, err := c.Usage(ctx, writableDirs...)
	if err != nil {
		return sandbox.Usage{}, fmt.Errorf("sandbox usage %s: %w", id, err)
	}
	return sandbox.Usage{CPUNanos: u.CPUNanos, MemoryBytes: u.MemoryBytes, Pids: u.Pids, DiskBytes: u.DiskBytes}, nil
}

// Logs reads the sandbox container's output (the agent's and the main
// process's) from the kubelet through the API server, keeping the last
// limit bytes. A sandbox whose Pod has not run yet, or is gone, has none.
func (r *Runtime) Logs(ctx context.Context, id string, limit int64) ([]byte, error) {
	if limit < 0 {
		return nil, errdefs.Invalid("sandbox logs %s: negative limit %d", id, limit)
	}
	pod, _, err := r.lookup(id)
	if err != nil {
		return nil, fmt.Errorf("sandbox logs %s: %w", id, err)
	}
	if pod == nil || !containerStarted(pod) {
		return nil, nil
	}
	rc, err := r.pods.GetLogs(pod.Name, &corev1.PodLogOptions{Container: containerName}).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox logs %s: %w", id, classify(err))
	}
	defer rc.Close()
	t := tail{limit: int(limit)}
	if _, err := io.Copy(&t, rc); err != nil {
		return nil, fmt.Errorf("sandbox logs %s: %w", id, err)
	}
	return t.bytes(), nil
}

// containerStarted reports whether the sandbox container has run: only
// then does the kubelet have its output.
func containerStarted(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == containerName {
			return cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil
		}
	}
	return false
}

// tail keeps the last limit bytes written to it, holding at most twice
// that.
type tail struct {
	buf   []byte
	limit int
}

func (t *tail) Write(p []byte) (int, error) {
	if len(p) >= t.limit {
		t.buf = append(t.buf[:0], p[len(p)-t.limit:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
	}
	return len(p), nil
}

func (t *tail) bytes() []byte {
	if len(t.buf) > t.limit {
		return t.buf[len(t.buf)-t.limit:]
	}
	return t.buf
}
