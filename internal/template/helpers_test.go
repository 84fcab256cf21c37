package template

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// fakePrepuller records prepull requests. Images named in fail are
// refused with that error.
type fakePrepuller struct {
	mu    sync.Mutex
	calls []prepullCall
	fail  map[string]error
}

type prepullCall struct{ Image, Template string }

func (f *fakePrepuller) Prepull(ctx context.Context, image, template string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, prepullCall{image, template})
	if err := f.fail[image]; err != nil {
		return "", err
	}
	return fmt.Sprintf("pp-%08d", len(f.calls)), nil
}

func (f *fakePrepuller) Calls() []prepullCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]prepullCall{}, f.calls...)
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

type fixture struct {
	svc   *Service
	store store.Store
	pp    *fakePrepuller
	clock *clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{store: st, pp: &fakePrepuller{}, clock: &clock{t: epoch}}
	f.svc = New(st, WithPrepuller(f.pp), WithClock(f.clock.Now), WithLogger(slog.New(slog.DiscardHandler)))
	return f
}

// create makes a template named name with image img, failing the test on
// error.
func (f *fixture) create(t *testing.T, name, img string, tags ...string) *api.Template {
	t.Helper()
	tpl, err := f.svc.Create(context.Background(), api.CreateTemplateRequest{
		Name: name, Tags: tags, Spec: api.TemplateSpec{Image: img},
	})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return tpl
}

// names lists the stored template names, newest first.
func (f *fixture) names(t *testing.T) []string {
	t.Helper()
	ts, _, err := f.store.ListTemplates(context.Background(), store.TemplateFilter{})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, tpl := range ts {
		out = append(out, tpl.Name)
	}
	return out
}

// checkErr checks that err has class and wire code.
func checkErr(t *testing.T, err, class error, code string) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Errorf("error %v: want class %v", err, class)
	}
	if got := errdefs.Code(err); got != code {
		t.Errorf("error %v: code %q, want %q", err, got, code)
	}
}

// defaulted is spec {Image: img} with LiteBoxd's defaults.
func defaulted(img string) api.TemplateSpec {
	return api.TemplateSpec{Image: img, Resources: api.ResourceSpec{CPU: "500m", Memory: "512Mi"}, StartupTimeout: 300}
}
