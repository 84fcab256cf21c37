package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/google/go-cmp/cmp"
)

// fakePrepullDaemon serves the prepull routes from memory and records
// every request as "METHOD PATH?QUERY BODY". A created task is pending;
// each GET of it moves it one step on: pulling 1/2, then completed 2/2, or
// failed for the image "broken". Tasks started five minutes ago.
type fakePrepullDaemon struct {
	recorder
	nextID int
	tasks  map[string]*api.PrepullTask
	order  []string
}

var prepullStart = time.Now().Add(-5 * time.Minute).UTC()

func newFakePrepullDaemon(t *testing.T) *fakePrepullDaemon {
	d := &fakePrepullDaemon{tasks: map[string]*api.PrepullTask{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/images/prepull", d.create)
	mux.HandleFunc("POST /api/v1/templates/{name}/prepull", d.create)
	mux.HandleFunc("GET /api/v1/images/prepull", d.list)
	mux.HandleFunc("GET /api/v1/images/prepull/{id}", d.get)
	mux.HandleFunc("DELETE /api/v1/images/prepull/{id}", d.remove)
	d.serve(t, mux)
	return d
}

func (d *fakePrepullDaemon) add(task api.PrepullTask) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tasks[task.ID] = &task
	d.order = append(d.order, task.ID)
}

func (d *fakePrepullDaemon) create(w http.ResponseWriter, r *http.Request) {
	image, template := "", r.PathValue("name")
	if template != "" {
		if template != "py" {
			fail(w, http.StatusNotFound, api.CodeTemplateNotFound, fmt.Sprintf("Template '%s' not found", template))
			return
		}
		image = "python:3.13"
	} else {
		var req api.PrepullRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Image == "" {
			fail(w, http.StatusBadRequest, api.CodeInvalidRequest, "image is required")
			return
		}
		image = req.Image
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.tasks {
		if t.Image == image && (t.Status == api.PrepullPending || t.Status == api.PrepullPulling) {
			fail(w, http.StatusConflict, api.CodePrepullInProgress, fmt.Sprintf("prepull already in progress for image '%s' (id: %s)", image, t.ID))
			return
		}
	}
	d.nextID++
	t := &api.PrepullTask{ID: fmt.Sprintf("pp-%d", d.nextID), Image: image, Status: api.PrepullPending,
		Template: template, StartedAt: prepullStart}
	d.tasks[t.ID] = t
	d.order = append(d.order, t.ID)
	reply(w, http.StatusAccepted, t)
}

func (d *fakePrepullDaemon) list(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := api.List[api.PrepullTask]{Items: []api.PrepullTask{}}
	for i := len(d.order) - 1; i >= 0; i-- {
		t := d.tasks[d.order[i]]
		if t == nil || r.URL.Query().Has("status") && t.Status != r.URL.Query().Get("status") ||
			r.URL.Query().Has("image") && t.Image != r.URL.Query().Get("image") {
			continue
		}
		out.Items = append(out.Items, *t)
	}
	reply(w, http.StatusOK, out)
}

func (d *fakePrepullDaemon) task(w http.ResponseWriter, r *http.Request) *api.PrepullTask {
	t := d.tasks[r.PathValue("id")]
	if t == nil {
		fail(w, http.StatusNotFound, api.CodePrepullNotFound, fmt.Sprintf("Prepull task '%s' not found", r.PathValue("id")))
	}
	return t
}

func (d *fakePrepullDaemon) get(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.task(w, r)
	if t == nil {
		return
	}
	reply(w, http.StatusOK, t)
	done := prepullStart.Add(time.Minute)
	switch {
	case t.Status == api.PrepullPending:
		t.Status, t.Progress = api.PrepullPulling, api.PrepullProgress{Ready: 1, Total: 2}
	case t.Status == api.PrepullPulling && t.Image == "broken":
		t.Status, t.Error, t.CompletedAt = api.PrepullFailed, "pull broken: manifest unknown", &done
	case t.Status == api.PrepullPulling:
		t.Status, t.Progress, t.CompletedAt = api.PrepullCompleted, api.PrepullProgress{Ready: 2, Total: 2}, &done
	}
}

func (d *fakePrepullDaemon) remove(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.task(w, r) == nil {
		return
	}
	delete(d.tasks, r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}

func TestPrepullCommands(t *testing.T) {
	seed := []api.PrepullTask{
		{ID: "pp-7", Image: "alpine", Status: api.PrepullCompleted, Progress: api.PrepullProgress{Ready: 1, Total: 1}, StartedAt: prepullStart},
		{ID: "pp-8", Image: "python:3.12", Status: api.PrepullPulling, Progress: api.PrepullProgress{Ready: 2, Total: 5},
			Template: "py", StartedAt: prepullStart},
		{ID: "pp-9", Image: "nope", Status: api.PrepullFailed, Error: "pull nope: denied\nmore detail", StartedAt: prepullStart},
	}
	tests := []struct {
		name     string
		args     []string
		want     result
		requests []string
	}{
		{
			name: "create",
			args: []string{"prepull", "create", "busybox", "--timeout", "90"},
			want: result{Stdout: "" +
				"ID     IMAGE     STATUS    PROGRESS   TEMPLATE   AGE   ERROR\n" +
				"pp-1   busybox   pending   -          -          5m    \n"},
			requests: []string{`POST /api/v1/images/prepull {"image":"busybox","timeout":90}`},
		},
		{
			name: "create with a duration",
			args: []string{"prepull", "create", "busybox", "--timeout", "20m"},
			want: result{Stdout: "" +
				"ID     IMAGE     STATUS    PROGRESS   TEMPLATE   AGE   ERROR\n" +
				"pp-1   busybox   pending   -          -          5m    \n"},
			requests: []string{`POST /api/v1/images/prepull {"image":"busybox","timeout":1200}`},
		},
		{
			name: "create with a timeout past the daemon's maximum",
			args: []string{"prepull", "create", "busybox", "--timeout", "10000000000"},
			want: result{Stdout: "" +
				"ID     IMAGE     STATUS    PROGRESS   TEMPLATE   AGE   ERROR\n" +
				"pp-1   busybox   pending   -          -          5m    \n"},
			requests: []string{`POST /api/v1/images/prepull {"image":"busybox","timeout":86400}`},
		},
		{
			name:     "create for a template, json",
			args:     []string{"prepull", "create", "--template", "py", "--json"},
			want:     result{Stdout: "{\n  \"id\": \"pp-1\",\n  \"image\": \"python:3.13\",\n  \"status\": \"pending\",\n  \"progress\": {\n    \"ready\": 0,\n    \"total\": 0\n  },\n  \"template\": \"py\",\n  \"startedAt\": \"<time>\"\n}\n"},
			requests: []string{"POST /api/v1/templates/py/prepull"},
		},
		{
			name:     "create for a missing template",
			args:     []string{"prepull", "create", "--template", "nope"},
			want:     result{Code: 1, Stderr: "agent2env prepull: prepull for template nope: Template 'nope' not found (TEMPLATE_NOT_FOUND, HTTP 404)\n"},
			requests: []string{"POST /api/v1/templates/nope/prepull"},
		},
		{
			name:     "create while one is active",
			args:     []string{"prepull", "create", "python:3.12"},
			want:     result{Code: 1, Stderr: "prepull already in progress for image 'python:3.12' (id: pp-8) (PREPULL_IN_PROGRESS, HTTP 409)"},
			requests: []string{`POST /api/v1/images/prepull {"image":"python:3.12"}`},
		},
		{
			name: "ls",
			args: []string{"prepull", "ls"},
			want: result{Stdout: "" +
				"ID     IMAGE         STATUS      PROGRESS   TEMPLATE   AGE   ERROR\n" +
				"pp-9   nope          failed      -          -          5m    pull nope: denied ...\n" +
				"pp-8   python:3.12   pulling     2/5        py         5m    \n" +
				"pp-7   alpine        completed   1/1        -          5m    \n"},
			requests: []string{"GET /api/v1/images/prepull"},
		},
		{
			name: "ls filtered",
			args: []string{"prepull", "ls", "--image", "python:3.12", "--status", "pulling"},
			want: result{Stdout: "" +
				"ID     IMAGE         STATUS    PROGRESS   TEMPLATE   AGE   ERROR\n" +
				"pp-8   python:3.12   pulling   2/5        py         5m    \n"},
			requests: []string{"GET /api/v1/images/prepull?image=python%3A3.12&status=pulling"},
		},
		{
			name:     "ls json",
			args:     []string{"prepull", "ls", "--status", "completed", "--json"},
			want:     result{Stdout: "{\n  \"items\": [\n    {\n      \"id\": \"pp-7\",\n      \"image\": \"alpine\",\n      \"status\": \"completed\",\n      \"progress\": {\n        \"ready\": 1,\n        \"total\": 1\n      },\n      \"startedAt\": \"<time>\"\n    }\n  ]\n}\n"},
			requests: []string{"GET /api/v1/images/prepull?status=completed"},
		},
		{
			name: "get",
			args: []string{"prepull", "get", "pp-7"},
			want: result{Stdout: "" +
				"ID     IMAGE    STATUS      PROGRESS   TEMPLATE   AGE   ERROR\n" +
				"pp-7   alpine   completed   1/1        -          5m    \n"},
			requests: []string{"GET /api/v1/images/prepull/pp-7"},
		},
		{
			name:     "get missing",
			args:     []string{"prepull", "get", "pp-0"},
			want:     result{Code: 1, Stderr: "agent2env prepull: get prepull task pp-0: Prepull task 'pp-0' not found (PREPULL_NOT_FOUND, HTTP 404)\n"},
			requests: []string{"GET /api/v1/images/prepull/pp-0"},
		},
		{
			name:     "rm removes what it can",
			args:     []string{"prepull", "rm", "pp-7", "pp-0", "pp-9"},
			want:     result{Code: 1, Stdout: "pp-7\npp-9\n", Stderr: "delete prepull task pp-0: Prepull task 'pp-0' not found"},
			requests: []string{"DELETE /api/v1/images/prepull/pp-7", "DELETE /api/v1/images/prepull/pp-0", "DELETE /api/v1/images/prepull/pp-9"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakePrepullDaemon(t)
			for _, task := range seed {
				d.add(task)
			}
			code, stdout, stderr := run(t, tt.args...)
			got := result{Code: code, Stdout: stripKey(stdout, "startedAt"), Stderr: tt.want.Stderr}
			if !strings.Contains(stderr, tt.want.Stderr) {
				got.Stderr = stderr
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.requests, d.requests); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// stripKey replaces the value of the JSON string key on every line.
func stripKey(s, key string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if k, _, ok := strings.Cut(l, `"`+key+`": "`); ok {
			end := ""
			if strings.HasSuffix(l, ",") {
				end = ","
			}
			lines[i] = k + `"` + key + `": "<time>"` + end
		}
	}
	return strings.Join(lines, "\n")
}

func TestPrepullWait(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		stdout  string
		err     error
		request int // GETs of the task
	}{
		{
			name: "pending, pulling, completed",
			args: []string{"create", "alpine", "--wait"},
			stdout: "" +
				"ID     IMAGE    STATUS      PROGRESS   TEMPLATE   AGE   ERROR\n" +
				"pp-1   alpine   completed   2/2        -          5m    \n",
			request: 3,
		},
		{
			name: "failed",
			args: []string{"create", "--wait", "broken"},
			stdout: "" +
				"ID     IMAGE    STATUS   PROGRESS   TEMPLATE   AGE   ERROR\n" +
				"pp-1   broken   failed   1/2        -          5m    pull broken: manifest unknown\n",
			err:     &client.PrepullFailedError{TaskID: "pp-1", Image: "broken", Reason: "pull broken: manifest unknown"},
			request: 3,
		},
		{
			name:    "for a template",
			args:    []string{"create", "--template", "py", "--wait", "--json"},
			request: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakePrepullDaemon(t)
			var stdout, stderr bytes.Buffer
			_, err := execute(t.Context(), env{stdout: &stdout, stderr: &stderr, poll: time.Millisecond},
				append([]string{"prepull"}, tt.args...))
			switch want := tt.err.(type) {
			case nil:
				if err != nil {
					t.Fatal(err)
				}
			case *client.PrepullFailedError:
				var got *client.PrepullFailedError
				if !errors.As(err, &got) || !cmp.Equal(want, got) {
					t.Fatalf("err %#v, want %#v", err, want)
				}
			}
			if tt.stdout != "" && stdout.String() != tt.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), tt.stdout)
			}
			if strings.Contains(strings.Join(tt.args, " "), "--json") {
				var task api.PrepullTask
				if err := json.Unmarshal(stdout.Bytes(), &task); err != nil || task.Status != api.PrepullCompleted || task.Template != "py" {
					t.Errorf("json output %s (%v), want the completed task of template py", stdout.String(), err)
				}
			}
			gets := 0
			for _, r := range d.requests {
				if strings.HasPrefix(r, "GET /api/v1/images/prepull/pp-1") {
					gets++
				}
			}
			if gets != tt.request {
				t.Errorf("%d polls, want %d: %q", gets, tt.request, d.requests)
			}
		})
	}
}

func TestPrepullUsageErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"prepull"}, "usage: agent2env prepull <command>"},
		{[]string{"prepull", "bogus"}, `unknown command "bogus"`},
		{[]string{"prepull", "create"}, "need one IMAGE or --template NAME"},
		{[]string{"prepull", "create", "a", "b"}, "need one IMAGE or --template NAME"},
		{[]string{"prepull", "create", "alpine", "--template", "py"}, "not both"},
		{[]string{"prepull", "create", "--template", "py", "--timeout", "5"}, "--timeout applies to an IMAGE only"},
		{[]string{"prepull", "create", "alpine", "--timeout", "-1"}, `invalid argument "-1" for "--timeout" flag: must not be negative`},
		{[]string{"prepull", "ls", "x"}, `unexpected argument "x"`},
		{[]string{"prepull", "ls", "--status", "done"}, `--status "done"`},
		{[]string{"prepull", "get"}, "need one task ID"},
		{[]string{"prepull", "rm"}, "need at least one task ID"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			d := newFakePrepullDaemon(t)
			checkUsageError(t, &d.recorder, tt.args, tt.stderr)
		})
	}
}
