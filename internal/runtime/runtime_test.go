package runtime_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

func TestRegistry(t *testing.T) {
	var got runtime.Options
	runtime.Register("test-fake", func(ctx context.Context, opts runtime.Options) (sandbox.Runtime, error) {
		got = opts
		return fakeruntime.New(), nil
	})
	runtime.Register("test-broken", func(context.Context, runtime.Options) (sandbox.Runtime, error) {
		return nil, errdefs.Invalid("bad setting")
	})
	if names := runtime.Names(); !slices.Contains(names, "test-fake") || !slices.IsSorted(names) {
		t.Errorf("Names = %v", names)
	}

	ctx := context.Background()
	rt, err := runtime.New(ctx, "test-fake", runtime.Options{Root: "/r", Settings: map[string]string{"test-fake.x": "1"}})
	if err != nil || rt.Name() != fakeruntime.Name {
		t.Fatalf("New = %v, %v", rt, err)
	}
	if got.Root != "/r" || got.Logger == nil || got.Settings["test-fake.x"] != "1" {
		t.Errorf("factory got %+v, want Root, Settings and a default Logger", got)
	}

	_, err = runtime.New(ctx, "test-broken", runtime.Options{})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "runtime test-broken: bad setting") {
		t.Errorf("New of a failing factory = %v", err)
	}
	_, err = runtime.New(ctx, "nosuch", runtime.Options{})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `unknown runtime "nosuch" (known: `) ||
		!strings.Contains(err.Error(), "test-fake") {
		t.Errorf("New of an unknown name = %v, want one listing the known runtimes", err)
	}

	for _, name := range []string{"test-fake", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			runtime.Register(name, func(context.Context, runtime.Options) (sandbox.Runtime, error) { return nil, nil })
		}()
	}
}

func TestOwnSettings(t *testing.T) {
	opts := runtime.Options{Settings: map[string]string{"oci.binary": "crun", "kube.namespace": "sandboxes"}}
	got, err := opts.OwnSettings("oci", "binary")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"binary": "crun"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	opts.Settings["oci.bniary"] = "runc"
	_, err = opts.OwnSettings("oci", "binary")
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `"oci.bniary" (known: oci.binary)`) {
		t.Errorf("a misspelt setting = %v", err)
	}
}
