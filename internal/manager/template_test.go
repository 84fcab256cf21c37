package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// fakeTemplates resolves templates from a map; every template is at
// version 2.
type fakeTemplates map[string]api.TemplateSpec

func (f fakeTemplates) Resolve(_ context.Context, name string, version int) (api.TemplateSpec, int, error) {
	spec, ok := f[name]
	if !ok || (version != 0 && version != 2) {
		return api.TemplateSpec{}, 0, errdefs.WithCode(errdefs.NotFound("template %s version %d not found", name, version), api.CodeTemplateNotFound)
	}
	return spec, 2, nil
}

func templateEnv(t *testing.T, specs fakeTemplates) *env {
	e := newEnv(t, Config{})
	e.m.templates = specs
	return e
}

func TestCreateFromTemplate(t *testing.T) {
	ttl := 0
	e := templateEnv(t, fakeTemplates{"py": {
		Image: "alpine", Resources: api.ResourceSpec{CPU: "500m", Memory: "512Mi"}, TTL: 600,
		Env: map[string]string{"A": "template", "B": "template"},
	}})
	sb := e.create(t, CreateRequest{Template: "py", CPU: "2", TTL: &ttl, Env: map[string]string{"B": "override"}, Image: ""})
	want := map[string]string{"A": "template", "B": "override"}
	if sb.Status != string(api.StatusRunning) || sb.Template != "py" || sb.TemplateVersion != 2 ||
		sb.Image != "alpine" || sb.CPU != "2" || sb.Memory != "512Mi" || sb.TTL != 0 || sb.ExpiresAt != nil ||
		sb.Env["A"] != want["A"] || sb.Env["B"] != want["B"] {
		t.Errorf("sandbox = %+v", sb)
	}

	for _, tt := range []struct {
		name string
		req  CreateRequest
		want error
		code string
	}{
		{"unknown template", CreateRequest{Template: "nope"}, errdefs.ErrNotFound, api.CodeTemplateNotFound},
		{"unknown version", CreateRequest{Template: "py", TemplateVersion: 7}, errdefs.ErrNotFound, api.CodeTemplateNotFound},
		{"negative version", CreateRequest{Template: "py", TemplateVersion: -1}, errdefs.ErrInvalidArgument, ""},
		{"image and template", CreateRequest{Template: "py", Image: "alpine"}, errdefs.ErrInvalidArgument, ""},
		{"bad override", CreateRequest{Template: "py", Memory: "lots"}, errdefs.ErrInvalidArgument, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.records(t))
			_, err := e.m.Create(context.Background(), tt.req)
			if !errors.Is(err, tt.want) || (tt.code != "" && errdefs.Code(err) != tt.code) {
				t.Errorf("err = %v (code %q), want %v %s", err, errdefs.Code(err), tt.want, tt.code)
			}
			if after := len(e.records(t)); after != before {
				t.Errorf("a failed create left a record")
			}
		})
	}
}

func TestTemplateStartup(t *testing.T) {
	tests := []struct {
		name       string
		spec       api.TemplateSpec
		want       api.SandboxStatus
		wantReason string
		wantFiles  map[string]string // relative to the work dir
	}{
		{
			name: "files before the startup script",
			spec: api.TemplateSpec{
				Files:         []api.FileSpec{{Destination: "/workspace/conf/app.txt", Content: "hello"}},
				StartupScript: "cat conf/app.txt > copied.txt",
			},
			want: api.StatusRunning, wantReason: "ready: startup complete",
			wantFiles: map[string]string{"conf/app.txt": "hello", "copied.txt": "hello"},
		},
		{
			name: "startup script fails",
			spec: api.TemplateSpec{StartupScript: "echo broken >&2; exit 3"},
			want: api.StatusFailed, wantReason: "startup script exited with code 3: broken",
		},
		{
			name: "startup timeout",
			spec: api.TemplateSpec{StartupScript: "sleep 30", StartupTimeout: 1},
			want: api.StatusFailed, wantReason: "startupTimeout",
		},
		{
			name: "readiness probe passes",
			spec: api.TemplateSpec{
				StartupScript:  "(sleep 1; touch ready) >/dev/null 2>&1 &",
				ReadinessProbe: &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"test", "-f", "ready"}}, PeriodSeconds: 1, FailureThreshold: 5},
			},
			want: api.StatusRunning, wantReason: "ready: startup complete",
		},
		{
			name: "readiness probe fails",
			spec: api.TemplateSpec{
				ReadinessProbe: &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"false"}}, PeriodSeconds: 1, FailureThreshold: 2},
			},
			want: api.StatusFailed, wantReason: "readiness probe failed 2 times",
		},
		{
			name: "main process cannot start",
			spec: api.TemplateSpec{Command: []string{"no-such-binary-a2e"}},
			want: api.StatusFailed, wantReason: "start main process",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.Image = "alpine"
			e := templateEnv(t, fakeTemplates{"t": tt.spec})
			sb := e.create(t, CreateRequest{Template: "t"})
			if sb.Status != string(api.StatusPending) {
				t.Fatalf("a template with startup steps is %s at create, want pending", sb.Status)
			}
			var workDir string
			if tt.wantFiles != nil {
				// Read the files before anything can remove the sandbox.
				e.waitStatus(t, sb.ID, tt.want)
				var err error
				if workDir, err = e.rt.WorkDir(sb.ID); err != nil {
					t.Fatal(err)
				}
			}
			got := e.waitStatus(t, sb.ID, tt.want)
			if !strings.Contains(got.Reason, tt.wantReason) {
				t.Errorf("reason = %q, want it to contain %q", got.Reason, tt.wantReason)
			}
			for name, content := range tt.wantFiles {
				b, err := os.ReadFile(filepath.Join(workDir, name))
				if err != nil || string(b) != content {
					t.Errorf("file %s = %q, %v; want %q", name, b, err, content)
				}
			}
			if tt.want == api.StatusFailed && len(e.rt.IDs()) != 0 {
				t.Errorf("failed startup left runtime state: %v", e.rt.IDs())
			}
		})
	}
}

func TestTemplateMainProcess(t *testing.T) {
	tests := []struct {
		name       string
		command    []string
		args       []string
		want       api.SandboxStatus
		wantReason string
	}{
		{"exit 0 succeeds", []string{"sh", "-c"}, []string{"sleep 0.2"}, api.StatusSucceeded, "main process exited with code 0"},
		{"exit 5 fails", []string{"sh", "-c", "exit 5"}, nil, api.StatusFailed, "main process exited with code 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := templateEnv(t, fakeTemplates{"job": {Image: "alpine", Command: tt.command, Args: tt.args}})
			sb := e.create(t, CreateRequest{Template: "job"})
			e.waitStatus(t, sb.ID, api.StatusRunning)
			deadline := time.Now().Add(5 * time.Second)
			for {
				e.m.sweep(context.Background())
				got, _ := e.m.Get(context.Background(), sb.ID)
				if got.Status == string(tt.want) {
					if got.Reason != tt.wantReason {
						t.Errorf("reason = %q, want %q", got.Reason, tt.wantReason)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("sandbox is %s (%s), want %s", got.Status, got.Reason, tt.want)
				}
				time.Sleep(50 * time.Millisecond)
			}
			// Stopped, files kept, to be started again.
			if st := e.rt.State(sb.ID); st != sandbox.StateStopped {
				t.Errorf("runtime state of the finished sandbox = %s, want stopped", st)
			}
		})
	}
}

// Deleting a sandbox whose startup script runs ends the startup at once.
func TestDeleteDuringStartup(t *testing.T) {
	e := templateEnv(t, fakeTemplates{"slow": {Image: "alpine", StartupScript: "sleep 30"}})
	sb := e.create(t, CreateRequest{Template: "slow"})
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := e.m.Delete(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("delete waited %v for the startup script", d)
	}
	if _, err := e.m.Get(context.Background(), sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if len(e.rt.IDs()) != 0 || len(e.records(t)) != 0 {
		t.Errorf("left behind: runtime %v, records %v", e.rt.IDs(), e.records(t))
	}
}

// A warm pool's sandbox made from a template is pooled like one made from
// an image: hidden from List, without an expiry until Claim hands it out.
// (The template's request once replaced the pool's, so that such sandboxes
// were ordinary ones that Claim refused.)
func TestCreatePooledFromTemplate(t *testing.T) {
	e := templateEnv(t, fakeTemplates{"t": {Image: "alpine", TTL: 600}})
	ctx := context.Background()
	sb, err := e.m.CreatePooled(ctx, CreateRequest{Template: "t"}, "t")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Pool != "t" || sb.ExpiresAt != nil {
		t.Errorf("pooled sandbox from a template: pool %q, expires %v; want pool t and no expiry", sb.Pool, sb.ExpiresAt)
	}
	if list, err := e.m.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List with only a pooled sandbox: %d sandboxes, %v; want none", len(list), err)
	}
	claimed, err := e.m.Claim(ctx, sb.ID, Claim{})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if claimed.Pool != "" || claimed.ExpiresAt == nil || claimed.Template != "t" {
		t.Errorf("claimed: pool %q, expires %v, template %q; want no pool, an expiry, template t", claimed.Pool, claimed.ExpiresAt, claimed.Template)
	}
}

// TestSpareKernel: the language a sandbox is made for reaches the runtime
// as its spare kernel, from an image or a template, unless the template
// has startup steps, which an interpreter started ahead of them would miss.
func TestSpareKernel(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  CreateRequest
		want string
	}{
		{"image", CreateRequest{Image: "alpine", SpareKernel: "python"}, "python"},
		{"none asked", CreateRequest{Image: "alpine"}, ""},
		{"template", CreateRequest{Template: "plain", SpareKernel: "python"}, "python"},
		{"template with a startup script", CreateRequest{Template: "script", SpareKernel: "python"}, ""},
		{"template with files", CreateRequest{Template: "files", SpareKernel: "python"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := templateEnv(t, fakeTemplates{
				"plain":  {Image: "alpine"},
				"script": {Image: "alpine", StartupScript: "true"},
				"files":  {Image: "alpine", Files: []api.FileSpec{{Destination: "/workspace/a.txt", Content: "a"}}},
			})
			got := make(chan string, 1)
			e.rt.SetHooks(fakeruntime.Hooks{Create: func(_ context.Context, spec *sandbox.Spec) error {
				got <- spec.SpareKernel
				return nil
			}})
			sb := e.create(t, tc.req)
			e.waitStatus(t, sb.ID, api.StatusRunning)
			if spare := <-got; spare != tc.want {
				t.Errorf("the runtime's spare kernel = %q, want %q", spare, tc.want)
			}
		})
	}
}

// askedPool is a warm pool that has nothing to give and records what it
// was asked for.
type askedPool struct{ asked []CreateRequest }

func (p *askedPool) TakeSandbox(_ context.Context, req CreateRequest) (*store.Sandbox, bool) {
	p.asked = append(p.asked, req)
	return nil, false
}

// A create from a template asks the warm pools for the version it
// resolves to now, never "any": a pool must not hand out a version a
// template update left behind, nor answer for a deleted template.
func TestCreateAsksPoolForResolvedVersion(t *testing.T) {
	for _, tt := range []struct {
		name    string
		req     CreateRequest
		asked   int // the version the pool is asked for; -1: not asked
		code    string
		created bool
	}{
		{"latest", CreateRequest{Template: "py"}, 2, "", true},
		{"that version", CreateRequest{Template: "py", TemplateVersion: 2}, 2, "", true},
		{"unknown template", CreateRequest{Template: "gone"}, -1, api.CodeTemplateNotFound, false},
		{"unknown version", CreateRequest{Template: "py", TemplateVersion: 7}, -1, api.CodeTemplateNotFound, false},
		{"image", CreateRequest{Image: "alpine"}, 0, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := templateEnv(t, fakeTemplates{"py": {Image: "alpine"}})
			pool := &askedPool{}
			e.m.pool = pool
			sb, err := e.m.Create(context.Background(), tt.req)
			if (err == nil) != tt.created || errdefs.Code(err) != tt.code {
				t.Fatalf("create: %+v, %v (code %q), want created %v, code %q", sb, err, errdefs.Code(err), tt.created, tt.code)
			}
			switch {
			case tt.asked < 0 && len(pool.asked) != 0:
				t.Errorf("the pool was asked for %+v", pool.asked)
			case tt.asked >= 0 && (len(pool.asked) != 1 || pool.asked[0].TemplateVersion != tt.asked):
				t.Errorf("the pool was asked for %+v, want version %d", pool.asked, tt.asked)
			}
		})
	}
}
