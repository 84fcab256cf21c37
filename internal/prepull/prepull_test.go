package prepull

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/prepull/prepulltest"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

type fixture struct {
	svc    *Service
	store  *sqlite.Store
	images *prepulltest.Images
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	imgs := prepulltest.NewImages()
	svc := New(st, imgs, slog.New(slog.DiscardHandler), opts...)
	t.Cleanup(func() {
		svc.Close()
		st.Close()
	})
	return &fixture{svc: svc, store: st, images: imgs}
}

// wait polls task id until ok accepts it.
func (f *fixture) wait(t *testing.T, id string, what string, ok func(*api.PrepullTask) bool) *api.PrepullTask {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		task, err := f.svc.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if ok(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never became %s: %+v", id, what, task)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (f *fixture) waitStatus(t *testing.T, id, status string) *api.PrepullTask {
	t.Helper()
	return f.wait(t, id, status, func(task *api.PrepullTask) bool { return task.Status == status })
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

func TestLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pull := f.images.Hold("python:3.12")
	task, err := f.svc.Start(ctx, "  python:3.12 ", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(task.ID, "pp-") || len(task.ID) != len("pp-")+8 {
		t.Errorf("id %q, want pp-<8 hex>", task.ID)
	}
	want := &api.PrepullTask{ID: task.ID, Image: "python:3.12", Status: api.PrepullPending, StartedAt: task.StartedAt}
	if diff := cmp.Diff(want, task); diff != "" {
		t.Errorf("started task (-want +got):\n%s", diff)
	}
	if time.Since(task.StartedAt) > time.Minute || task.StartedAt.Location() != time.UTC {
		t.Errorf("startedAt %v", task.StartedAt)
	}
	waitClosed(t, pull.Started(), "pull start")
	if got, _ := f.svc.Get(ctx, task.ID); got.Status != api.PrepullPending {
		t.Errorf("before any progress: %s, want pending", got.Status)
	}

	steps := []struct {
		ev           image.Progress
		ready, total int
	}{
		{image.Progress{Phase: image.PhaseResolve, Item: "docker.io/library/python:3.12"}, 0, 0},
		{image.Progress{Phase: image.PhaseDownload, Item: "sha256:a", Total: 100}, 0, 1},
		{image.Progress{Phase: image.PhaseDownload, Item: "sha256:b", Total: 50}, 0, 2},
		{image.Progress{Phase: image.PhaseDownload, Item: "sha256:a", Current: 100, Total: 100}, 0, 2},
		{image.Progress{Phase: image.PhaseUnpack, Item: "sha256:a", Current: 40, Total: 100}, 0, 2},
		{image.Progress{Phase: image.PhaseUnpack, Item: "sha256:a", Current: 100, Total: 100}, 1, 2},
	}
	for i, st := range steps {
		if !pull.Emit(st.ev) {
			t.Fatalf("step %d: pull ended", i)
		}
		f.wait(t, task.ID, "pulling", func(got *api.PrepullTask) bool {
			return got.Status == api.PrepullPulling && got.Progress == api.PrepullProgress{Ready: st.ready, Total: st.total}
		})
	}
	pull.Finish(nil)
	got := f.waitStatus(t, task.ID, api.PrepullCompleted)
	if got.Progress != (api.PrepullProgress{Ready: 2, Total: 2}) || got.CompletedAt == nil || got.Error != "" ||
		!got.StartedAt.Equal(task.StartedAt) || got.CompletedAt.Before(got.StartedAt) {
		t.Errorf("completed task %+v", got)
	}
	if !f.images.Stored("docker.io/library/python:3.12") {
		t.Error("the image store was not asked for the normalized reference")
	}
}

func TestProgress(t *testing.T) {
	layer := func(phase, item string, cur, total int64) image.Progress {
		return image.Progress{Phase: phase, Item: item, Current: cur, Total: total}
	}
	tests := []struct {
		name      string
		events    []image.Progress
		ready     int
		total     int
		completed [2]int
	}{
		{"nothing yet", nil, 0, 0, [2]int{1, 1}},
		{"already stored", []image.Progress{{Phase: image.PhaseDone}}, 0, 0, [2]int{1, 1}},
		{"layers", []image.Progress{
			{Phase: image.PhaseResolve},
			layer(image.PhaseDownload, "a", 0, 10), layer(image.PhaseDownload, "b", 0, 10), layer(image.PhaseDownload, "c", 0, 10),
			layer(image.PhaseUnpack, "b", 10, 10),
		}, 1, 3, [2]int{3, 3}},
		{"unpack of unknown size is not done", []image.Progress{layer(image.PhaseUnpack, "a", 10, 0)}, 0, 1, [2]int{1, 1}},
		{"unpack done stays done", []image.Progress{layer(image.PhaseUnpack, "a", 10, 10), layer(image.PhaseDownload, "a", 0, 10)}, 1, 1, [2]int{1, 1}},
		{"done makes all ready", []image.Progress{layer(image.PhaseDownload, "a", 0, 10), layer(image.PhaseDownload, "b", 0, 10), {Phase: image.PhaseDone}}, 2, 2, [2]int{2, 2}},
		{"build", []image.Progress{{Phase: image.PhaseBuild, Item: "mmdebstrap"}, layer(image.PhaseUnpack, "sha256:x", 5, 0)}, 0, 1, [2]int{1, 1}},
		{"build done", []image.Progress{{Phase: image.PhaseBuild, Item: "mmdebstrap"}, {Phase: image.PhaseDone}}, 1, 1, [2]int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr tracker
			for _, ev := range tt.events {
				tr.observe(ev)
			}
			if r, n := tr.progress(); r != tt.ready || n != tt.total {
				t.Errorf("progress %d/%d, want %d/%d", r, n, tt.ready, tt.total)
			}
			if r, n := tr.completed(); [2]int{r, n} != tt.completed {
				t.Errorf("completed %d/%d, want %v", r, n, tt.completed)
			}
		})
	}

	// observe reports a change only when the visible state changes.
	var tr tracker
	for i, c := range []struct {
		ev      image.Progress
		changed bool
	}{
		{image.Progress{Phase: image.PhaseResolve}, true}, // pending → pulling
		{image.Progress{Phase: image.PhaseResolve}, false},
		{layer(image.PhaseDownload, "a", 0, 10), true},
		{layer(image.PhaseDownload, "a", 5, 10), false},
		{layer(image.PhaseUnpack, "a", 10, 10), true},
	} {
		if got := tr.observe(c.ev); got != c.changed {
			t.Errorf("event %d %+v: changed %v, want %v", i, c.ev, got, c.changed)
		}
	}
}

func TestDuplicate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.images.Hold("python:3.12")
	first, err := f.svc.Start(ctx, "python:3.12", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"python:3.12", "docker.io/library/python:3.12", "index.docker.io/library/python:3.12", " python:3.12\n"} {
		_, err := f.svc.Start(ctx, ref, "tpl", 0)
		if !errors.Is(err, errdefs.ErrAlreadyExists) || errdefs.Code(err) != api.CodePrepullInProgress {
			t.Errorf("start %q while active: %v (code %q), want already exists PREPULL_IN_PROGRESS", ref, err, errdefs.Code(err))
			continue
		}
		if !strings.Contains(err.Error(), first.ID) || !strings.Contains(err.Error(), "prepull already in progress for image") {
			t.Errorf("conflict message %q does not name the task", err)
		}
	}
	// Another image, or another tag, is another task.
	for _, ref := range []string{"python:3.13", "alpine"} {
		if _, err := f.svc.Start(ctx, ref, "", 0); err != nil {
			t.Errorf("start %s: %v", ref, err)
		}
	}
	list, _ := f.svc.List(ctx, "python:3.12", "")
	if len(list) != 1 {
		t.Errorf("tasks for python:3.12: %+v, want just the first", list)
	}
	// A finished task does not block a new one.
	done, err := f.svc.Start(ctx, "alpine:3.20", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	f.waitStatus(t, done.ID, api.PrepullCompleted)
	again, err := f.svc.Start(ctx, "alpine:3.20", "", 0)
	if err != nil {
		t.Fatalf("start after the first completed: %v", err)
	}
	if again.ID == done.ID {
		t.Error("same id twice")
	}
}

func TestFailures(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	missing, err := f.svc.Start(ctx, "missing:1", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := f.waitStatus(t, missing.ID, api.PrepullFailed)
	if !strings.Contains(got.Error, "not found") || got.CompletedAt == nil {
		t.Errorf("failed pull: %+v", got)
	}

	pull := f.images.Hold("alpine:3.20")
	broken, err := f.svc.Start(ctx, "alpine:3.20", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, pull.Started(), "pull start")
	pull.Emit(image.Progress{Phase: image.PhaseDownload, Item: "sha256:a", Total: 10})
	f.waitStatus(t, broken.ID, api.PrepullPulling)
	pull.Finish(errors.New("registry said no"))
	got = f.waitStatus(t, broken.ID, api.PrepullFailed)
	if got.Error != "registry said no" || got.CompletedAt == nil || got.Progress != (api.PrepullProgress{Ready: 0, Total: 1}) {
		t.Errorf("failed pull: %+v", got)
	}
	// A failed task does not block a retry.
	if _, err := f.svc.Start(ctx, "alpine:3.20", "", 0); err != nil {
		t.Errorf("retry after failure: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	f := newFixture(t)
	pull := f.images.Hold("alpine")
	task, err := f.svc.Start(context.Background(), "alpine", "", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	got := f.waitStatus(t, task.ID, api.PrepullFailed)
	if got.Error != "prepull timed out after 50ms" || got.CompletedAt == nil {
		t.Errorf("timed out task: %+v", got)
	}
	waitClosed(t, pull.Cancelled(), "pull cancellation")
}

func TestTimeoutDefaults(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		ref  string
		in   time.Duration
		want time.Duration
	}{
		{"a:1", 0, DefaultTimeout},
		{"a:2", time.Second, time.Second},
		{"a:3", 48 * time.Hour, MaxTimeout},
	}
	for _, tt := range tests {
		f.images.Hold(tt.ref)
		task, err := f.svc.Start(context.Background(), tt.ref, "", tt.in)
		if err != nil {
			t.Fatal(err)
		}
		f.svc.mu.Lock()
		r := f.svc.active[task.ID]
		f.svc.mu.Unlock()
		if r == nil || r.timeout != tt.want {
			t.Errorf("timeout %v: run %+v, want timeout %v", tt.in, r, tt.want)
		}
	}
}

// Create takes the API's request: seconds, capped before they overflow a
// time.Duration.
func TestCreate(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		image   string
		timeout int
		want    time.Duration
	}{
		{" b:1 ", 0, DefaultTimeout},
		{"b:2", 60, time.Minute},
		{"b:3", 48 * 3600, MaxTimeout},
		{"b:4", math.MaxInt, MaxTimeout},
	}
	for _, tt := range tests {
		f.images.Hold(strings.TrimSpace(tt.image))
		task, err := f.svc.Create(context.Background(), api.PrepullRequest{Image: tt.image, Timeout: tt.timeout})
		if err != nil {
			t.Fatal(err)
		}
		f.svc.mu.Lock()
		r := f.svc.active[task.ID]
		f.svc.mu.Unlock()
		if r == nil || r.timeout != tt.want || task.Image != strings.TrimSpace(tt.image) {
			t.Errorf("timeout %d: task %+v, run %+v, want timeout %v", tt.timeout, task, r, tt.want)
		}
	}
	for _, req := range []api.PrepullRequest{{Image: "b:5", Timeout: -1}, {Image: "b:6", Timeout: math.MinInt}, {Image: " "}} {
		if _, err := f.svc.Create(context.Background(), req); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("create %+v: %v, want invalid argument", req, err)
		}
	}
}

func TestInvalid(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name    string
		ref     string
		timeout time.Duration
	}{
		{"empty", "", 0},
		{"blank", " \t\n", 0},
		{"bad reference", "Not A Ref!", 0},
		{"upper case repository", "Python:3", 0},
		{"negative timeout", "alpine", -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.svc.Start(context.Background(), tt.ref, "", tt.timeout); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("start: %v, want invalid argument", err)
			}
		})
	}
	if list, _ := f.svc.List(context.Background(), "", ""); len(list) != 0 || f.images.Calls() != 0 {
		t.Errorf("invalid requests left tasks %+v, %d pulls", list, f.images.Calls())
	}
}

func TestDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pull := f.images.Hold("python:3.12")
	task, err := f.svc.Start(ctx, "python:3.12", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, pull.Started(), "pull start")
	if err := f.svc.Delete(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	// Delete returns only once the pull was given up.
	select {
	case <-pull.Cancelled():
	default:
		t.Error("delete left the pull running")
	}
	for op, err := range map[string]error{
		"get":    func() error { _, err := f.svc.Get(ctx, task.ID); return err }(),
		"delete": f.svc.Delete(ctx, task.ID),
	} {
		if !errors.Is(err, errdefs.ErrNotFound) || errdefs.Code(err) != api.CodePrepullNotFound ||
			err.Error() != "Prepull task '"+task.ID+"' not found" {
			t.Errorf("%s after delete: %v (code %q)", op, err, errdefs.Code(err))
		}
	}
	// The image is free for a new task.
	if _, err := f.svc.Start(ctx, "python:3.12", "", 0); err != nil {
		t.Errorf("start after delete: %v", err)
	}

	done, err := f.svc.Start(ctx, "alpine", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	f.waitStatus(t, done.ID, api.PrepullCompleted)
	if err := f.svc.Delete(ctx, done.ID); err != nil {
		t.Errorf("delete completed task: %v", err)
	}
	if _, err := f.svc.Get(ctx, done.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("completed task survived delete: %v", err)
	}
}

// TestDeleteInterrupted: a delete whose request ends before the task's
// record is removed leaves the task failed, its pull given up, not
// pending for ever.
func TestDeleteInterrupted(t *testing.T) {
	f := newFixture(t)
	pull := f.images.Hold("python:3.12")
	task, err := f.svc.Start(context.Background(), "python:3.12", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, pull.Started(), "pull start")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.svc.Delete(ctx, task.ID); err == nil {
		t.Fatal("delete with its request ended succeeded")
	}
	waitClosed(t, pull.Cancelled(), "pull cancelled")
	got := f.waitStatus(t, task.ID, api.PrepullFailed)
	if got.Error != "prepull task deleted" || got.CompletedAt == nil {
		t.Errorf("task %+v, want failed: prepull task deleted", got)
	}
	if err := f.svc.Delete(context.Background(), task.ID); err != nil {
		t.Errorf("delete again: %v", err)
	}
}

func TestList(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	start := func(ref string) string {
		t.Helper()
		task, err := f.svc.Start(ctx, ref, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // distinct startedAt
		return task.ID
	}
	alpine := start("alpine")
	f.waitStatus(t, alpine, api.PrepullCompleted)
	missing := start("missing")
	f.waitStatus(t, missing, api.PrepullFailed)
	f.images.Hold("python:3.12")
	python := start("docker.io/library/python:3.12")

	tests := []struct {
		image, status string
		want          []string // nil: refused
	}{
		{"", "", []string{python, missing, alpine}},
		{"alpine", "", []string{alpine}},
		{"docker.io/library/alpine:latest", "", []string{alpine}},
		{"python:3.12", "", []string{python}},
		{"python:3.12", api.PrepullPending, []string{python}},
		{"", api.PrepullFailed, []string{missing}},
		{"", api.PrepullCompleted, []string{alpine}},
		{"alpine", api.PrepullFailed, []string{}},
		{"Not A Ref!", "", []string{}},
		// The statuses are the openapi's enum PrepullStatus (seed 003
		// §6.3): another is refused, naming them, not an empty list.
		{"", "bogus", nil},
		{"", "Completed", nil},
		{"alpine", "active", nil},
	}
	for _, tt := range tests {
		list, err := f.svc.List(ctx, tt.image, tt.status)
		if tt.want == nil {
			if err == nil || !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "pending, pulling, completed, failed") {
				t.Errorf("list image=%q status=%q: %v, %v; want ErrInvalidArgument naming the statuses", tt.image, tt.status, list, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, task := range list {
			ids = append(ids, task.ID)
		}
		if diff := cmp.Diff(tt.want, ids); diff != "" {
			t.Errorf("list image=%q status=%q (-want +got):\n%s", tt.image, tt.status, diff)
		}
	}
}

func TestRecover(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	done := now.Add(time.Second)
	left := []*store.Prepull{
		{ID: "pp-00000001", Image: "alpine", Status: api.PrepullPending, StartedAt: now},
		{ID: "pp-00000002", Image: "python", Status: api.PrepullPulling, Ready: 1, Total: 3, StartedAt: now},
		{ID: "pp-00000003", Image: "node", Status: api.PrepullCompleted, Ready: 1, Total: 1, StartedAt: now, CompletedAt: &done},
	}
	for _, p := range left {
		if err := f.store.CreatePrepull(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// A task of this daemon, started before Recover, is left alone.
	f.images.Hold("busybox")
	ours, err := f.svc.Start(ctx, "busybox", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"pp-00000001", "pp-00000002"} {
		got, _ := f.svc.Get(ctx, id)
		if got.Status != api.PrepullFailed || got.Error != ReasonRestarted || got.CompletedAt == nil {
			t.Errorf("interrupted task after recover: %+v", got)
		}
	}
	if got, _ := f.svc.Get(ctx, "pp-00000002"); got.Progress != (api.PrepullProgress{Ready: 1, Total: 3}) {
		t.Errorf("recover lost the progress: %+v", got.Progress)
	}
	if got, _ := f.svc.Get(ctx, "pp-00000003"); got.Status != api.PrepullCompleted || !got.CompletedAt.Equal(done) {
		t.Errorf("completed task changed by recover: %+v", got)
	}
	if got, _ := f.svc.Get(ctx, ours.ID); got.Status == api.PrepullFailed {
		t.Errorf("recover failed a live task: %+v", got)
	}
	// The image of an interrupted task can be prepulled again.
	if _, err := f.svc.Start(ctx, "alpine", "", 0); err != nil {
		t.Errorf("start after recover: %v", err)
	}
}

func TestClose(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pull := f.images.Hold("alpine")
	task, err := f.svc.Start(ctx, "alpine", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, pull.Started(), "pull start")
	f.svc.Close()
	got, err := f.svc.Get(ctx, task.ID)
	if err != nil || got.Status != api.PrepullFailed || got.Error != ReasonShutdown {
		t.Errorf("task after close: %+v, %v", got, err)
	}
	if _, err := f.svc.Start(ctx, "python", "", 0); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("start after close: %v, want unavailable", err)
	}
	f.svc.Close() // twice is fine
}

// fakeTemplates resolves templates from a map of name to image.
type fakeTemplates map[string]string

func (ft fakeTemplates) Resolve(ctx context.Context, name string, version int) (api.TemplateSpec, int, error) {
	img, ok := ft[name]
	if !ok || version != 0 {
		return api.TemplateSpec{}, 0, errdefs.WithCode(errdefs.NotFound("template '%s' not found", name), "TEMPLATE_NOT_FOUND")
	}
	return api.TemplateSpec{Image: img}, 3, nil
}

func TestForTemplate(t *testing.T) {
	ctx := context.Background()
	if _, err := newFixture(t).svc.ForTemplate(ctx, "py"); !errors.Is(err, errdefs.ErrNotImplemented) {
		t.Errorf("without templates: %v, want not implemented", err)
	}
	f := newFixture(t, WithTemplates(fakeTemplates{"py": "python:3.12", "empty": " "}))
	tests := []struct {
		name  string
		class error
		code  string
	}{
		{"py", nil, ""},
		{"py", errdefs.ErrAlreadyExists, api.CodePrepullInProgress},
		{"nope", errdefs.ErrNotFound, "TEMPLATE_NOT_FOUND"},
		{"empty", errdefs.ErrInvalidArgument, ""},
	}
	f.images.Hold("python:3.12")
	for _, tt := range tests {
		task, err := f.svc.ForTemplate(ctx, tt.name)
		if tt.class == nil {
			if err != nil || task.Template != tt.name || task.Image != "python:3.12" {
				t.Errorf("for template %s: %+v, %v", tt.name, task, err)
			}
			continue
		}
		if !errors.Is(err, tt.class) || (tt.code != "" && errdefs.Code(err) != tt.code) {
			t.Errorf("for template %s: %v (code %q), want %v %s", tt.name, err, errdefs.Code(err), tt.class, tt.code)
		}
	}
	// The daemon builds the template service after this one and passes a
	// func that finds it when called.
	var late fakeTemplates
	withFunc := newFixture(t, WithTemplates(TemplateResolverFunc(func(ctx context.Context, name string, v int) (api.TemplateSpec, int, error) {
		return late.Resolve(ctx, name, v)
	})))
	late = fakeTemplates{"a": "alpine"}
	if task, err := withFunc.svc.ForTemplate(ctx, "a"); err != nil || task.Image != "alpine" {
		t.Errorf("TemplateResolverFunc: %+v, %v", task, err)
	}
}

func TestPrepullAdapter(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id, err := f.svc.Prepull(ctx, "alpine", "base")
	if err != nil {
		t.Fatal(err)
	}
	got := f.waitStatus(t, id, api.PrepullCompleted)
	if got.Template != "base" || got.Image != "alpine" {
		t.Errorf("adapter task %+v", got)
	}
	if _, err := f.svc.Prepull(ctx, "", "base"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("adapter with empty image: %v", err)
	}
}
