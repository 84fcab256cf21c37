package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// images holds "alpine"; "missing" cannot be had; "slow" is prepared
// until the context ends.
type images struct{}

func (images) Get(ctx context.Context, ref string) (*image.Image, error) {
	if ref == "alpine" {
		return &image.Image{}, nil
	}
	return nil, errdefs.NotFound("image %s", ref)
}

func (images) Ensure(ctx context.Context, ref string, _ image.ProgressFunc) (*image.Image, error) {
	switch ref {
	case "alpine":
		return &image.Image{}, nil
	case "slow":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, errors.New("registry unreachable")
}

// TestCreateAndWait: a sandbox that runs is returned running; one that
// fails is refused with its failure classified and deleted; one still
// pending when the wait is up is returned pending, and kept; one whose
// caller is gone before it could be answered is deleted.
func TestCreateAndWait(t *testing.T) {
	tests := []struct {
		name      string
		image     string
		startErr  error
		callerFor time.Duration // how long the caller waits; 0: as long as it takes
		wantClass error         // nil: no error
		want      api.SandboxStatus
		wantKept  bool
	}{
		{name: "caller gone while waiting", image: "slow", callerFor: 50 * time.Millisecond, wantClass: context.DeadlineExceeded},
		{name: "runs", image: "alpine", want: api.StatusRunning, wantKept: true},
		{name: "image cannot be had", image: "missing", wantClass: ErrImageUnavailable},
		{name: "start fails", image: "alpine", startErr: errors.New("no pids"), wantClass: ErrStartFailed},
		{name: "still pending", image: "slow", want: api.StatusPending, wantKept: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "", fakeruntime.WithImages(images{}))
			if tc.startErr != nil {
				e.rt.SetHooks(fakeruntime.Hooks{Start: func(context.Context, string) error { return tc.startErr }})
			}
			ctx := context.Background()
			if tc.callerFor > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.callerFor)
				defer cancel()
			}
			sb, err := e.sb.CreateAndWait(ctx, api.CreateSandboxRequest{Image: tc.image}, 200*time.Millisecond)
			switch {
			case tc.wantClass == nil && err != nil:
				t.Fatalf("CreateAndWait: %v", err)
			case tc.wantClass == ErrStartFailed && (errors.Is(err, errdefs.ErrInvalidArgument) || errors.Is(err, ErrImageUnavailable)):
				t.Fatalf("CreateAndWait: %v, want a start failure that is not the request's fault", err)
			case tc.wantClass == ErrImageUnavailable && !errors.Is(err, errdefs.ErrInvalidArgument):
				t.Fatalf("CreateAndWait: %v, want an invalid argument", err)
			case tc.wantClass != nil && !errors.Is(err, tc.wantClass):
				t.Fatalf("CreateAndWait: %v, want %v", err, tc.wantClass)
			case err == nil && sb.Status != tc.want:
				t.Fatalf("status %s (%s), want %s", sb.Status, sb.Reason, tc.want)
			}
			n, err := e.sb.Count(context.Background(), ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if kept := n == 1; kept != tc.wantKept {
				t.Errorf("%d sandboxes left, want kept=%v", n, tc.wantKept)
			}
		})
	}
}
