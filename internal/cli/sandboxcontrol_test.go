package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/google/go-cmp/cmp"
)

// fakeControlDaemon serves sandbox create (from a template), get and the
// stop, start, restart, pause and resume routes from memory, with the
// daemon's status rules: stop needs a running sandbox and leaves it
// succeeded, start needs a succeeded one and leaves it pending, restart
// takes either; pause takes a running one and resume a paused one. A pending
// sandbox runs at its next GET, unless its template is "broken".
type fakeControlDaemon struct {
	recorder
	sandboxes map[string]*api.Sandbox
	creates   []api.CreateSandboxRequest
	controls  []string // "op id"
}

func newFakeControlDaemon(t *testing.T) *fakeControlDaemon {
	d := &fakeControlDaemon{sandboxes: map[string]*api.Sandbox{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sandboxes", d.create)
	mux.HandleFunc("GET /api/v1/sandboxes/{id}", d.get)
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/{op}", d.control)
	d.serve(t, mux)
	return d
}

func (d *fakeControlDaemon) add(sb api.Sandbox) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sandboxes[sb.ID] = &sb
}

func (d *fakeControlDaemon) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, api.CodeInvalidRequest, err.Error())
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.creates = append(d.creates, req)
	if req.Template == "nope" {
		fail(w, http.StatusNotFound, api.CodeTemplateNotFound, "Template 'nope' not found")
		return
	}
	sb := &api.Sandbox{ID: fmt.Sprintf("sb%d", len(d.creates)), Image: "python:3.12", Status: api.StatusPending,
		Template: req.Template, TemplateVersion: max(req.TemplateVersion, 1)}
	d.sandboxes[sb.ID] = sb
	reply(w, http.StatusCreated, sb)
}

func (d *fakeControlDaemon) get(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sb := d.sandboxes[r.PathValue("id")]
	if sb == nil {
		fail(w, http.StatusNotFound, api.CodeSandboxNotFound, fmt.Sprintf("sandbox %s not found", r.PathValue("id")))
		return
	}
	if sb.Status == api.StatusPending {
		sb.Status, sb.Reason = api.StatusRunning, ""
		if sb.Template == "broken" {
			sb.Status, sb.Reason = api.StatusFailed, "startup script failed"
		}
	}
	reply(w, http.StatusOK, sb)
}

func (d *fakeControlDaemon) control(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	op, id := r.PathValue("op"), r.PathValue("id")
	d.controls = append(d.controls, op+" "+id)
	sb := d.sandboxes[id]
	if sb == nil {
		fail(w, http.StatusNotFound, api.CodeSandboxNotFound, fmt.Sprintf("sandbox %s not found", id))
		return
	}
	ok := map[string]bool{
		"stop":    sb.Status == api.StatusRunning,
		"start":   sb.Status == api.StatusSucceeded,
		"restart": sb.Status == api.StatusRunning || sb.Status == api.StatusSucceeded,
		"pause":   sb.Status == api.StatusRunning,
		"resume":  sb.Status == api.StatusPaused,
	}[op]
	if !ok {
		fail(w, http.StatusConflict, api.CodeConflict, fmt.Sprintf("cannot %s sandbox %s: it is %s", op, id, sb.Status))
		return
	}
	switch op {
	case "pause", "resume":
		sb.Status = map[string]api.SandboxStatus{"pause": api.StatusPaused, "resume": api.StatusRunning}[op]
		reply(w, http.StatusOK, sb)
		return
	case "stop":
		sb.Status, sb.Reason = api.StatusSucceeded, "stopped by request"
	default:
		sb.Status = api.StatusPending
	}
	reply(w, http.StatusOK, map[string]string{"message": op + " requested"})
}

func TestSandboxCreateFromTemplate(t *testing.T) {
	zero := 0
	tests := []struct {
		name string
		args []string
		want result
		req  api.CreateSandboxRequest
	}{
		{
			name: "latest version, no overrides",
			args: []string{"sandbox", "create", "--template", "py"},
			want: result{Stdout: "sb1\n"},
			req:  api.CreateSandboxRequest{Template: "py"},
		},
		{
			name: "version and overrides",
			args: []string{"sandbox", "create", "--template", "py", "--template-version", "2", "--cpu", "2", "--memory", "1Gi",
				"--ttl", "0", "--env", "A=1", "--env", "B=2"},
			want: result{Stdout: "sb1\n"},
			req: api.CreateSandboxRequest{Template: "py", TemplateVersion: 2, Overrides: &api.SandboxOverrides{
				CPU: "2", Memory: "1Gi", TTL: &zero, Env: map[string]string{"A": "1", "B": "2"}}},
		},
		{
			name: "json",
			args: []string{"sandbox", "create", "--template", "py", "--ttl", "60", "--json"},
			want: result{Stdout: `{
  "id": "sb1",
  "image": "python:3.12",
  "cpu": "",
  "memory": "",
  "ttl": 0,
  "status": "running",
  "template": "py",
  "templateVersion": 1,
  "created_at": "<time>",
  "updated_at": "<time>",
  "expires_at": "<time>",
  "state": "running"
}
`},
			req: api.CreateSandboxRequest{Template: "py", Overrides: &api.SandboxOverrides{TTL: new(60)}},
		},
		{
			name: "failed start",
			args: []string{"sandbox", "create", "--template", "broken"},
			want: result{Code: 1, Stderr: "sandbox sb1 failed: startup script failed"},
			req:  api.CreateSandboxRequest{Template: "broken"},
		},
		{
			name: "missing template",
			args: []string{"sandbox", "create", "--template", "nope"},
			want: result{Code: 1, Stderr: "agent2env sandbox: create sandbox: Template 'nope' not found (TEMPLATE_NOT_FOUND, HTTP 404)\n"},
			req:  api.CreateSandboxRequest{Template: "nope"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeControlDaemon(t)
			code, stdout, stderr := run(t, tt.args...)
			got := result{Code: code, Stdout: stripTimes(stdout), Stderr: tt.want.Stderr}
			if !strings.Contains(stderr, tt.want.Stderr) {
				got.Stderr = stderr
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]api.CreateSandboxRequest{tt.req}, d.creates); diff != "" {
				t.Errorf("create request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSandboxControl(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		want     result
		controls []string
		status   map[string]api.SandboxStatus // afterwards
	}{
		{
			name:     "stop",
			args:     []string{"sandbox", "stop", "run1", "run2"},
			want:     result{Stdout: "run1\nrun2\n"},
			controls: []string{"stop run1", "stop run2"},
			status:   map[string]api.SandboxStatus{"run1": api.StatusSucceeded, "run2": api.StatusSucceeded},
		},
		{
			name:     "stop a stopped sandbox",
			args:     []string{"sandbox", "stop", "off1"},
			want:     result{Code: 1, Stderr: "agent2env sandbox: stop sandbox off1: cannot stop sandbox off1: it is succeeded (CONFLICT, HTTP 409)\n"},
			controls: []string{"stop off1"},
		},
		{
			name:     "start waits until it runs",
			args:     []string{"sandbox", "start", "off1"},
			want:     result{Stdout: "off1\n"},
			controls: []string{"start off1"},
			status:   map[string]api.SandboxStatus{"off1": api.StatusRunning},
		},
		{
			name:     "start without waiting",
			args:     []string{"sandbox", "start", "--wait=false", "off1"},
			want:     result{Stdout: "off1\n"},
			controls: []string{"start off1"},
			status:   map[string]api.SandboxStatus{"off1": api.StatusPending},
		},
		{
			name:     "restart does what it can",
			args:     []string{"sandbox", "restart", "run1", "nope", "off1"},
			want:     result{Code: 1, Stdout: "run1\noff1\n", Stderr: "restart sandbox nope: sandbox nope not found (SANDBOX_NOT_FOUND, HTTP 404)"},
			controls: []string{"restart run1", "restart nope", "restart off1"},
			status:   map[string]api.SandboxStatus{"run1": api.StatusRunning, "off1": api.StatusRunning},
		},
		{
			name:     "pause",
			args:     []string{"sandbox", "pause", "run1", "off1"},
			want:     result{Code: 1, Stdout: "run1\n", Stderr: "agent2env sandbox: pause sandbox off1: cannot pause sandbox off1: it is succeeded (CONFLICT, HTTP 409)\n"},
			controls: []string{"pause run1", "pause off1"},
			status:   map[string]api.SandboxStatus{"run1": api.StatusPaused, "off1": api.StatusSucceeded},
		},
		{
			name:     "resume",
			args:     []string{"sandbox", "resume", "zzz1", "run1"},
			want:     result{Code: 1, Stdout: "zzz1\n", Stderr: "agent2env sandbox: resume sandbox run1: cannot resume sandbox run1: it is running (CONFLICT, HTTP 409)\n"},
			controls: []string{"resume zzz1", "resume run1"},
			status:   map[string]api.SandboxStatus{"zzz1": api.StatusRunning, "run1": api.StatusRunning},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeControlDaemon(t)
			d.add(api.Sandbox{ID: "run1", Status: api.StatusRunning})
			d.add(api.Sandbox{ID: "run2", Status: api.StatusRunning})
			d.add(api.Sandbox{ID: "off1", Status: api.StatusSucceeded, Reason: "stopped by request"})
			d.add(api.Sandbox{ID: "zzz1", Status: api.StatusPaused, Reason: "paused by request"})
			check(t, tt.args, tt.want)
			if diff := cmp.Diff(tt.controls, d.controls); diff != "" {
				t.Errorf("control requests (-want +got):\n%s", diff)
			}
			for id, want := range tt.status {
				if got := d.sandboxes[id].Status; got != want {
					t.Errorf("sandbox %s is %s, want %s", id, got, want)
				}
			}
		})
	}
}

func TestSandboxTemplateUsageErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"sandbox", "create", "--image", "alpine", "--template", "py"}, "give --image or --template, not both"},
		{[]string{"sandbox", "create", "--template-version", "2"}, "--template-version needs --template"},
		{[]string{"sandbox", "create", "--template", "py", "--template-version", "-1"}, "--template-version must be at least 1"},
		{[]string{"sandbox", "create", "--template", "py", "--template-version", "0"}, "--template-version must be at least 1"},
		{[]string{"sandbox", "stop"}, "need at least one sandbox id"},
		{[]string{"sandbox", "start"}, "need at least one sandbox id"},
		{[]string{"sandbox", "restart", "--wait=maybe", "sb1"}, `invalid argument "maybe" for "--wait" flag`},
		{[]string{"sandbox", "stop", "--wait", "sb1"}, "unknown flag: --wait"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			d := newFakeControlDaemon(t)
			checkUsageError(t, &d.recorder, tt.args, tt.stderr)
		})
	}
}
