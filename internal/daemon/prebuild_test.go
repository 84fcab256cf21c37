package daemon

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// blockingBuilder is an image.Ensurer whose builds run until their context
// ends; it reports each build's start and end.
type blockingBuilder struct {
	mu      sync.Mutex
	started []string
	begun   chan string // each build's ref as it starts
	ended   chan string // each build's ref once its context has ended
}

func newBlockingBuilder() *blockingBuilder {
	return &blockingBuilder{begun: make(chan string, 10), ended: make(chan string, 10)}
}

func (b *blockingBuilder) Get(ctx context.Context, ref string) (*image.Image, error) {
	return nil, errdefs.NotFound("image %s not found", ref)
}

func (b *blockingBuilder) Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	b.mu.Lock()
	b.started = append(b.started, ref)
	b.mu.Unlock()
	b.begun <- ref
	p(image.Progress{Phase: image.PhaseBuild, Item: "I: running apt-get update..."})
	<-ctx.Done()
	b.ended <- ref
	return nil, ctx.Err()
}

// TestPrebuildImages checks the background build of the defaults' images:
// started with the daemon, left out when switched off, stopped by the
// shutdown.
func TestPrebuildImages(t *testing.T) {
	tests := []struct {
		name string
		on   bool
		want []string // the builds started, in order
	}{
		{name: "on: the code-interpreter image first", on: true, want: []string{"agent2env/code-interpreter:latest"}},
		{name: "off", on: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBlockingBuilder()
			cfg := testConfig(t.TempDir(), fakeruntime.New())
			cfg.PrebuildImages, cfg.prebuilder = tt.on, b
			d := start(t, cfg, nil)
			if tt.on {
				select {
				case ref := <-b.begun:
					if ref != tt.want[0] {
						t.Errorf("first build %s, want %s", ref, tt.want[0])
					}
				case <-time.After(10 * time.Second):
					t.Fatal("no build started 10s after the daemon did")
				}
				if got := d.sys.Loops.Running(); !slices.Contains(got, "image prebuild") {
					t.Errorf("loops running: %v, want the image prebuild among them", got)
				}
			} else {
				waitLoop(t, d.sys, "sandbox sweep")
				if got := d.sys.Loops.Running(); slices.Contains(got, "image prebuild") {
					t.Errorf("loops running: %v, want no image prebuild", got)
				}
			}
			if err := d.stop(); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			b.mu.Lock()
			got := b.started
			b.mu.Unlock()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("builds (-want +got):\n%s", diff)
			}
			if tt.on {
				select {
				case <-b.ended:
				default:
					t.Error("the build in progress was not stopped by the shutdown")
				}
				if log := d.log.String(); !strings.Contains(log, "background image build stopped") {
					t.Errorf("the stop was not logged:\n%s", log)
				}
			}
		})
	}
}

// waitLoop waits until the loop name runs.
func waitLoop(t *testing.T, s *System, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(s.Loops.Running(), name); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("loop %s not running after 10s: %v", name, s.Loops.Running())
		}
	}
}

// TestPrebuildRefs checks which images the background build makes: every
// language's default source's, then the warm pools', templates resolved.
func TestPrebuildRefs(t *testing.T) {
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.Contexts.Defaults = map[string]contexts.Source{api.LanguageBash: {Image: "agent2env/python"}}
	d := start(t, cfg, nil)
	ctx := context.Background()
	if _, err := d.sys.Templates.Create(ctx, api.CreateTemplateRequest{Name: "nodes", Spec: api.TemplateSpec{Image: "agent2env/node"}}); err != nil {
		t.Fatal(err)
	}
	d.sys.cfg.WarmPools = map[string]int{"nodes": 1, "missing-template": 1}
	want := []string{"agent2env/python", "agent2env/code-interpreter", "agent2env/code-interpreter", "agent2env/node"}
	if diff := cmp.Diff(want, d.sys.prebuildRefs(ctx)); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}
	// The images list shows the built-in images, here none built.
	imgs, err := d.api.Image.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, img := range imgs {
		if img.Status == api.ImageMissing {
			missing = append(missing, img.Ref)
		}
	}
	if diff := cmp.Diff(image.Builtins(), missing); diff != "" {
		t.Errorf("missing images (-want +got):\n%s", diff)
	}
}
