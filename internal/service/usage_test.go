package service

import (
	"context"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// usageReader answers every sandbox with use, or err.
type usageReader struct {
	use sandbox.Usage
	err error
}

func (u usageReader) Usage(context.Context, string) (sandbox.Usage, error) { return u.use, u.err }

func TestUsage(t *testing.T) {
	measured := sandbox.Usage{CPUNanos: uint64(1500 * time.Millisecond), MemoryBytes: 64 << 20}
	for _, tc := range []struct {
		name   string
		reader sandbox.UsageReader // nil: the runtime measures nothing
		id     string              // "": a running sandbox's
		stop   bool
		want   SandboxUsage
		class  error
		code   string
	}{
		{name: "running", reader: usageReader{use: measured},
			want: SandboxUsage{MilliCPU: 500, MemoryLimit: 256 << 20, CPUTime: 1500 * time.Millisecond, MemoryBytes: 64 << 20}},
		{name: "the runtime measures nothing", class: errdefs.ErrNotImplemented},
		{name: "the measure fails", reader: usageReader{err: errdefs.Unavailable("cgroup gone")}, class: errdefs.ErrUnavailable},
		{name: "unknown sandbox", reader: usageReader{use: measured}, id: "sb-nope", class: errdefs.ErrNotFound},
		{name: "stopped sandbox", reader: usageReader{use: measured}, stop: true, class: errdefs.ErrFailedPrecondition, code: api.CodeSandboxNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "")
			if tc.reader != nil {
				e.sb.usage = tc.reader
			}
			ctx := context.Background()
			sb, err := e.sb.Create(ctx, api.CreateSandboxRequest{Image: "alpine", CPU: "500m", Memory: "256Mi"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.stop {
				if _, err := e.sb.Stop(ctx, sb.ID); err != nil {
					t.Fatal(err)
				}
			}
			id := sb.ID
			if tc.id != "" {
				id = tc.id
			}
			before := time.Now()
			got, err := e.sb.Usage(ctx, id)
			checkErr(t, err, tc.class, tc.code)
			if tc.class != nil {
				return
			}
			if got.At.Before(before) || got.At.After(time.Now()) {
				t.Errorf("At %v is not the time of the call", got.At)
			}
			got.At = time.Time{}
			if got != tc.want {
				t.Errorf("usage %+v, want %+v", got, tc.want)
			}
		})
	}
}
