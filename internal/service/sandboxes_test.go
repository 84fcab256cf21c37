package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store"
)

// TestSandboxJSONFields pins the wire names of every sandbox field,
// LiteBoxd's mixed conventions included.
func TestSandboxJSONFields(t *testing.T) {
	exp := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)
	sb := &store.Sandbox{ID: "id", Image: "img", Template: "tpl", TemplateVersion: 3, CPU: "1", Memory: "1Gi", TTL: 60,
		Env: map[string]string{"A": "b"}, Status: "running", Reason: "why", CreatedAt: exp.Add(-time.Minute), ExpiresAt: &exp}
	b, err := json.Marshal(NewSandboxes(nil, "").view(sb))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"id","image":"img","cpu":"1","memory":"1Gi","ttl":60,"env":{"A":"b"},"status":"running",` +
		`"template":"tpl","templateVersion":3,"created_at":"2030-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z","expires_at":"2030-01-01T00:01:00Z","reason":"why","state":"running"}`
	if string(b) != want {
		t.Errorf("sandbox JSON\n got %s\nwant %s", b, want)
	}
}

// The view shows the access token, and the accessUrl when the daemon's
// public URL is known; a sandbox without TTL expires Never.
func TestSandboxView(t *testing.T) {
	tests := []struct {
		name, publicURL, token string
		wantToken, wantURL     string
	}{
		{"token and public URL", "http://gw.test:8080", "tok", "tok", "http://gw.test:8080/api/v1/sandbox/sb1"},
		{"trailing slashes", "http://gw.test//", "tok", "tok", "http://gw.test/api/v1/sandbox/sb1"},
		{"no public URL", "", "tok", "tok", ""},
		{"no token", "http://gw.test", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewSandboxes(nil, tt.publicURL).view(&store.Sandbox{ID: "sb1", AccessToken: tt.token})
			if got.AccessToken != tt.wantToken || got.AccessURL != tt.wantURL {
				t.Errorf("view = token %q url %q, want %q %q", got.AccessToken, got.AccessURL, tt.wantToken, tt.wantURL)
			}
			if !got.ExpiresAt.Equal(api.Never) {
				t.Errorf("expires_at %v without TTL, want %v", got.ExpiresAt, api.Never)
			}
		})
	}
}

func TestCreate(t *testing.T) {
	e := newEnv(t, "http://gw.test")
	tests := []struct {
		name  string
		req   api.CreateSandboxRequest
		class error
		// want is compared on the fields it sets.
		want api.Sandbox
	}{
		{name: "image with top-level fields", req: api.CreateSandboxRequest{Image: "alpine", CPU: "2", Memory: "512Mi", TTL: ptr(0),
			Env: map[string]string{"A": "b"}},
			want: api.Sandbox{Image: "alpine", CPU: "2", Memory: "512Mi", TTL: 0, Env: map[string]string{"A": "b"}}},
		{name: "template", req: api.CreateSandboxRequest{Template: "small"},
			want: api.Sandbox{Image: "alpine", CPU: "500m", Memory: "256Mi", TTL: 60, Template: "small", TemplateVersion: 1}},
		{name: "template with overrides", req: api.CreateSandboxRequest{Template: "small",
			Overrides: &api.SandboxOverrides{CPU: "1", Memory: "1Gi", TTL: ptr(0), Env: map[string]string{"O": "v"}}},
			want: api.Sandbox{Image: "alpine", CPU: "1", Memory: "1Gi", TTL: 0, Env: map[string]string{"O": "v"}, Template: "small", TemplateVersion: 1}},
		{name: "template with overrides and top-level fields", req: api.CreateSandboxRequest{Template: "small", CPU: "2",
			Overrides: &api.SandboxOverrides{Memory: "1Gi"}}, class: errdefs.ErrInvalidArgument},
		{name: "template with top-level fields", req: api.CreateSandboxRequest{Template: "small", CPU: "2", TTL: ptr(0)},
			want: api.Sandbox{Image: "alpine", CPU: "2", Memory: "256Mi", TTL: 0, Template: "small", TemplateVersion: 1}},
		{name: "overrides apply to templates only", req: api.CreateSandboxRequest{Image: "alpine", Overrides: &api.SandboxOverrides{CPU: "1"}},
			class: errdefs.ErrInvalidArgument},
		{name: "templateVersion applies to templates only", req: api.CreateSandboxRequest{Image: "alpine", TemplateVersion: 2},
			class: errdefs.ErrInvalidArgument},
		{name: "template and image", req: api.CreateSandboxRequest{Template: "small", Image: "alpine"},
			class: errdefs.ErrInvalidArgument},
		{name: "unknown template", req: api.CreateSandboxRequest{Template: "nosuch"}, class: errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.rt.IDs())
			got, err := e.sb.Create(context.Background(), tt.req)
			checkErr(t, err, tt.class, "")
			if tt.class != nil {
				if n := len(e.rt.IDs()); n != before {
					t.Errorf("a refused create left %d sandboxes, want %d", n, before)
				}
				return
			}
			if got.Status != api.StatusRunning || got.AccessToken == "" || got.AccessURL != "http://gw.test/api/v1/sandbox/"+got.ID {
				t.Errorf("created %+v, want running with its token and accessUrl", got)
			}
			pick := api.Sandbox{Image: got.Image, CPU: got.CPU, Memory: got.Memory, TTL: got.TTL, Env: got.Env,
				Template: got.Template, TemplateVersion: got.TemplateVersion}
			if diff := cmp.Diff(tt.want, pick); diff != "" {
				t.Errorf("created sandbox (-want +got):\n%s", diff)
			}
			if again, err := e.sb.Get(context.Background(), got.ID); err != nil || !cmp.Equal(again, got) {
				t.Errorf("Get = %+v, %v; want what Create returned, %+v", again, err, got)
			}
		})
	}
}

func TestList(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	empty, err := e.sb.List(ctx, ListOptions{})
	if err != nil || empty.Items == nil || len(empty.Items) != 0 || empty.NextCursor != "" {
		t.Fatalf("List of none = %+v, %v; want an empty, non-nil page", empty, err)
	}
	var ids []string
	for range 3 {
		ids = append(ids, e.running(t).ID)
	}

	// Pages of 2 give every sandbox once, oldest first, or newest first.
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	for order, want := range map[api.Order][]string{"": ids, api.OrderAsc: ids, api.OrderDesc: newest} {
		var got []string
		pages := 0
		for opts := (ListOptions{Limit: ptr(2), Order: order}); ; pages++ {
			page, err := e.sb.List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, sb := range page.Items {
				got = append(got, sb.ID)
			}
			if page.NextCursor == "" {
				break
			}
			opts.Cursor = page.NextCursor
		}
		if diff := cmp.Diff(want, got); diff != "" || pages != 1 {
			t.Errorf("order %q: paged ids in %d pages (-want +got):\n%s", order, pages+1, diff)
		}
	}
	all, err := e.sb.List(ctx, ListOptions{})
	if err != nil || len(all.Items) != 3 || all.NextCursor != "" {
		t.Errorf("List without limit = %d items, cursor %q, %v", len(all.Items), all.NextCursor, err)
	}

	for _, opts := range []ListOptions{{Limit: ptr(0)}, {Limit: ptr(-1)}, {Limit: ptr(api.MaxPageSize + 1)}, {Cursor: "nope"},
		{Order: "newest"}, {Order: "DESC"}} {
		_, err := e.sb.List(ctx, opts)
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
		if opts.Order != "" && !strings.HasPrefix(err.Error(), "order ") {
			t.Errorf("order %q: %v, want an error naming order", opts.Order, err)
		}
	}
	if _, err := e.sb.List(ctx, ListOptions{Limit: ptr(api.MaxPageSize)}); err != nil {
		t.Errorf("List with the largest limit: %v", err)
	}
}

func TestControl(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	id := e.running(t).ID
	steps := []struct {
		name  string
		op    func(context.Context, string) (*api.Sandbox, error)
		class error
		want  api.SandboxStatus // then wait until it runs, when pending
	}{
		{"stop", e.sb.Stop, nil, api.StatusSucceeded},
		{"stop again", e.sb.Stop, errdefs.ErrFailedPrecondition, ""},
		{"start", e.sb.Start, nil, api.StatusPending},
		{"restart", e.sb.Restart, nil, api.StatusPending},
	}
	for _, st := range steps {
		got, err := st.op(ctx, id)
		checkErr(t, err, st.class, "")
		if st.class == nil && (got.ID != id || got.Status != st.want) {
			t.Errorf("%s = %+v, want sandbox %s %s", st.name, got, id, st.want)
		}
		if st.want == api.StatusPending {
			waitRunning(t, e, id)
		}
	}
	_, err := e.sb.Stop(ctx, "nosuch")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
	if err := e.sb.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = e.sb.Get(ctx, id)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
}

func waitRunning(t *testing.T, e *env, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sb, err := e.sb.Get(context.Background(), id)
		if err == nil && sb.Status == api.StatusRunning {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: %+v, %v; want running", id, sb, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFiles(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	id := e.running(t).ID

	_, err := e.sb.Upload(ctx, id, "", 0o644, strings.NewReader("x"))
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	_, err = e.sb.Upload(ctx, id, "../etc/passwd", 0o644, strings.NewReader("x"))
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	_, err = e.sb.Upload(ctx, "nosuch", "f", 0o644, strings.NewReader("x"))
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)

	fi, err := e.sb.Upload(ctx, id, "dir/hello.txt", 0o600, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	want := &api.FileInfo{Name: "hello.txt", Path: "/workspace/dir/hello.txt", Size: 5, Mode: "0600"}
	if diff := cmp.Diff(want, fi, cmpIgnoreModTime); diff != "" {
		t.Errorf("uploaded file (-want +got):\n%s", diff)
	}
	rc, size, err := e.sb.Download(ctx, id, "/workspace/dir/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "hello" || size != 5 {
		t.Errorf("download = %q (size %d), %v", b, size, err)
	}
	_, _, err = e.sb.Download(ctx, id, "nosuch")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeFileNotFound)

	logs, err := e.sb.Logs(ctx, id)
	if err != nil || len(logs.Events) == 0 {
		t.Errorf("logs = %+v, %v; want the lifecycle events", logs, err)
	}
	_, err = e.sb.Logs(ctx, "nosuch")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
}

var cmpIgnoreModTime = cmp.Comparer(func(a, b *api.FileInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.ModTime, y.ModTime = time.Time{}, time.Time{}
	return x == y
})

// TestCreateCallerGone: a create whose caller is gone before it could be
// answered (a client that closed its connection mid-create) leaves no
// sandbox behind, however many times it happens; one whose caller waits
// keeps its sandbox, and one that failed is kept for its reason.
func TestCreateCallerGone(t *testing.T) {
	tests := []struct {
		name     string
		gone     bool  // the caller's context ends while the sandbox starts
		startErr error // of the start
		wantErr  error
		wantKept int // records left
		wantRun  int // of them with runtime state
	}{
		{name: "caller gone while the sandbox starts", gone: true, wantErr: context.Canceled},
		{name: "caller waits", wantKept: 3, wantRun: 3},
		{name: "caller gone, the start failed", gone: true, startErr: errors.New("no pids"), wantKept: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "")
			for range 3 {
				ctx, cancel := context.WithCancel(context.Background())
				e.rt.SetHooks(fakeruntime.Hooks{Start: func(context.Context, string) error {
					if tt.gone {
						cancel()
					}
					return tt.startErr
				}})
				_, err := e.sb.Create(ctx, api.CreateSandboxRequest{Image: "alpine"})
				cancel()
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Create: %v, want %v", err, tt.wantErr)
				}
			}
			n, err := e.sb.Count(context.Background(), ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantKept || len(e.rt.IDs()) != tt.wantRun {
				t.Errorf("%d records and %d runtime sandboxes left, want %d and %d", n, len(e.rt.IDs()), tt.wantKept, tt.wantRun)
			}
		})
	}
}

// TestForkedCallerGone: the sandboxes a fork or a create from a snapshot
// made are deleted when the caller is gone before they could be
// answered, and kept when it waits.
func TestForkedCallerGone(t *testing.T) {
	for _, gone := range []bool{true, false} {
		t.Run(fmt.Sprintf("gone=%v", gone), func(t *testing.T) {
			e := newEnv(t, "")
			var sbs []*store.Sandbox
			for range 2 {
				sb, err := e.m.Create(context.Background(), manager.CreateRequest{Image: "alpine"})
				if err != nil {
					t.Fatal(err)
				}
				sbs = append(sbs, sb)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if gone {
				cancel()
			}
			defer cancel()
			_, err := e.sb.forked(ctx, &store.Snapshot{ID: "snap"}, nil, sbs, make([]map[string]string, len(sbs)))
			if gone != errors.Is(err, context.Canceled) || !gone && err != nil {
				t.Fatalf("forked: %v, want the caller's end: %v", err, gone)
			}
			want := len(sbs)
			if gone {
				want = 0
			}
			if n, err := e.sb.Count(context.Background(), ListOptions{}); err != nil || n != want || len(e.rt.IDs()) != want {
				t.Errorf("%d records (%v) and %d runtime sandboxes left, want %d", n, err, len(e.rt.IDs()), want)
			}
		})
	}
}
