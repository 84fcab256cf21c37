package service

import (
	"context"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/quantity"
)

// SandboxUsage is what the processes of a sandbox use now, beside the
// sandbox's limits.
type SandboxUsage struct {
	// MilliCPU and MemoryLimit are the sandbox's limits: millicores and
	// bytes.
	MilliCPU    int64
	MemoryLimit int64
	// CPUTime is the CPU time its processes have used since it started;
	// MemoryBytes is the memory they use now.
	CPUTime     time.Duration
	MemoryBytes int64
	// At is when the figures were read.
	At time.Time
}

// Usage measures running sandbox id: ErrFailedPrecondition when it is not
// running, ErrNotImplemented when the runtime measures nothing.
func (s *Sandboxes) Usage(ctx context.Context, id string) (SandboxUsage, error) {
	sb, err := s.m.Get(ctx, id)
	if err != nil {
		return SandboxUsage{}, err
	}
	if sb.Status != string(api.StatusRunning) {
		return SandboxUsage{}, errdefs.WithCode(errdefs.Precondition("sandbox %s is %s, not running", id, sb.Status), api.CodeSandboxNotReady)
	}
	if s.usage == nil {
		return SandboxUsage{}, fmt.Errorf("measure sandbox %s: %w", id, errdefs.ErrNotImplemented)
	}
	u, err := s.usage.Usage(ctx, id)
	if err != nil {
		return SandboxUsage{}, fmt.Errorf("measure sandbox %s: %w", id, err)
	}
	cpu, _ := quantity.ParseCPU(sb.CPU) // records were parsed when made
	mem, _ := quantity.ParseBytes(sb.Memory)
	return SandboxUsage{MilliCPU: cpu, MemoryLimit: mem, CPUTime: time.Duration(u.CPUNanos), MemoryBytes: int64(u.MemoryBytes), At: time.Now()}, nil
}
