package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/prepull"
	"github.com/agent2env/agent2env/internal/prepull/prepulltest"
	"github.com/agent2env/agent2env/internal/store/sqlite"
	tmpl "github.com/agent2env/agent2env/internal/template"
	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// templateDaemon serves the daemon's real template and prepull routes over
// a SQLite store in a temporary directory, with a fake image store: what
// "template export" writes is then exactly what the daemon writes, and
// what "template create -f" and "import" send must pass the daemon's own
// decoding. Templates are stamped three hours ago, so that their age
// prints as 3h.
type templateDaemon struct {
	recorder
	cl *client.Client
}

func newTemplateDaemon(t *testing.T) *templateDaemon {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	var svc *tmpl.Service // built after pp, which it takes
	pp := prepull.New(st, prepulltest.NewImages(), log, prepull.WithTemplates(prepull.TemplateResolverFunc(
		func(ctx context.Context, name string, v int) (api.TemplateSpec, int, error) {
			return svc.Resolve(ctx, name, v)
		})))
	stamp := time.Now().Add(-3 * time.Hour).UTC()
	svc = tmpl.New(st, tmpl.WithPrepuller(pp), tmpl.WithLogger(log), tmpl.WithClock(func() time.Time { return stamp }))
	mux := http.NewServeMux()
	httpapi.NewTemplateRoutes(svc).Register(mux)
	httpapi.NewPrepullRoutes(pp).Register(mux)
	d := &templateDaemon{}
	t.Cleanup(func() {
		pp.Close()
		st.Close()
	})
	d.serve(t, mux) // closed before the services: cleanups run last first
	if d.cl, err = client.New(os.Getenv(client.EnvURL)); err != nil {
		t.Fatal(err)
	}
	return d
}

// create makes a template directly, failing the test on error.
func (d *templateDaemon) create(t *testing.T, name, image string, tags ...string) {
	t.Helper()
	_, err := d.cl.Template.Create(t.Context(), api.CreateTemplateRequest{Name: name, Tags: tags, Spec: api.TemplateSpec{Image: image}})
	if err != nil {
		t.Fatal(err)
	}
}

// writeFile writes a file in a temporary directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pyYAML is a template as a person might write it, with a key in the
// lower case of older LiteBoxd exports.
const pyYAML = `apiVersion: liteboxd/v1
kind: SandboxTemplate
metadata:
  name: py
  displayName: Python
  description: |
    Python 3 with tools
    and a second line
  tags: [python, ml]
spec:
  image: python:3.12
  resources: {cpu: "1", memory: 1Gi}
  ttl: 3600
  env: {A: "1"}
  startupscript: pip install numpy
  persistence: {enabled: true, size: 1Gi, storageClassName: fast, reclaimPolicy: Retain}
  runtimeClassName: gvisor
`

func TestTemplateCommands(t *testing.T) {
	newTemplateDaemon(t)
	file := writeFile(t, "py.yaml", pyYAML)

	check(t, []string{"template", "create", "-f", file}, result{Stdout: "" +
		"NAME   VERSION   IMAGE         TAGS        UPDATED   DESCRIPTION\n" +
		"py     1         python:3.12   python,ml   3h        Python 3 with tools ...\n"})
	check(t, []string{"template", "create", "-f", file}, result{Code: 1,
		Stderr: "agent2env template: create template py: template with name 'py' already exists (TEMPLATE_EXISTS, HTTP 409)\n"})
	check(t, []string{"template", "ls"}, result{Stdout: "" +
		"NAME   VERSION   IMAGE         TAGS        UPDATED   DESCRIPTION\n" +
		"py     1         python:3.12   python,ml   3h        Python 3 with tools ...\n"})
	check(t, []string{"template", "ls", "--tag", "nope"}, result{Stdout: "NAME   VERSION   IMAGE   TAGS   UPDATED   DESCRIPTION\n"})
	_, out, _ := run(t, "template", "get", "py")
	want := `Name:             py
Display name:     Python
Description:      Python 3 with tools ...
Tags:             python, ml
Public:           true
Version:          1
Updated:          <time>
Image:            python:3.12
Resources:        cpu 1, memory 1Gi
TTL:              3600s
Env:              A=1
Startup script:   pip install numpy
Startup timeout:  300s
Persistence:      rootfs-overlay 1Gi, storage class fast, Retain on delete
Runtime class:    gvisor
`
	if diff := cmp.Diff(want, stripLine(out, "Updated:")); diff != "" {
		t.Errorf("template get (-want +got):\n%s", diff)
	}

	// What export writes, create -f reads back to the same template.
	before := getTemplate(t, "py")
	exported := filepath.Join(t.TempDir(), "out.yaml")
	check(t, []string{"template", "export", "py", "-f", exported}, result{})
	b, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	_, stdout, _ := run(t, "template", "export", "py")
	if stdout != string(b) || !strings.Contains(stdout, "kind: SandboxTemplate") || !strings.Contains(stdout, "startupScript: pip install numpy") {
		t.Errorf("export to stdout:\n%s\nto file:\n%s", stdout, b)
	}
	check(t, []string{"template", "rm", "py"}, result{Stdout: "py\n"})
	check(t, []string{"template", "create", "-f", exported}, result{Stdout: "" +
		"NAME   VERSION   IMAGE         TAGS        UPDATED   DESCRIPTION\n" +
		"py     1         python:3.12   python,ml   3h        Python 3 with tools ...\n"})
	after := getTemplate(t, "py")
	before.ID, after.ID = "", ""
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("template after export and create -f (-before +after):\n%s", diff)
	}

	// Update from JSON, list the versions, roll back.
	update := writeFile(t, "py2.json", `{"name":"py","tags":[],"spec":{"image":"python:3.13"},"changelog":"from the file"}`)
	check(t, []string{"template", "update", "py", "-f", update, "--changelog", "bump to 3.13"}, result{Stdout: "" +
		"NAME   VERSION   IMAGE         TAGS   UPDATED   DESCRIPTION\n" +
		"py     2         python:3.13          3h        Python 3 with tools ...\n"})
	check(t, []string{"template", "versions", "py"}, result{Stdout: "" +
		"VERSION   IMAGE         CREATED   CHANGELOG\n" +
		"2         python:3.13   3h        bump to 3.13\n" +
		"1         python:3.12   3h        Initial version\n"})
	check(t, []string{"template", "rollback", "py", "--to", "1", "--changelog", "undo"}, result{Stdout: "" +
		"NAME   VERSION   FROM   TO\n" +
		"py     3         2      1\n"})
	if tpl := getTemplate(t, "py"); tpl.Spec.Image != "python:3.12" || tpl.LatestVersion != 3 {
		t.Errorf("after rollback: image %s version %d, want python:3.12 version 3", tpl.Spec.Image, tpl.LatestVersion)
	}
	_, out, _ = run(t, "template", "get", "py", "--version", "2", "--json")
	var v api.TemplateVersion
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Version != 2 || v.Spec.Image != "python:3.13" || v.Changelog != "bump to 3.13" {
		t.Errorf("get --version 2 --json: %+v (%v)", v, err)
	}
	_, out, _ = run(t, "template", "get", "py", "--version", "3")
	if !strings.Contains(out, "Version:          3\nChangelog:        undo\n") {
		t.Errorf("get --version 3:\n%s", out)
	}
	_, out, _ = run(t, "template", "export", "py", "--version", "2")
	if !strings.Contains(out, "image: python:3.13") {
		t.Errorf("export --version 2:\n%s", out)
	}

	// The file's changelog is used when --changelog is not given.
	if code, _, stderr := run(t, "template", "update", "py", "-f", update, "--json"); code != 0 {
		t.Fatalf("update --json: exit %d\n%s", code, stderr)
	}
	_, out, _ = run(t, "template", "versions", "py", "--json")
	var vl api.VersionList
	if err := json.Unmarshal([]byte(out), &vl); err != nil || vl.Total != 4 || vl.Items[0].Changelog != "from the file" {
		t.Errorf("versions --json: %+v (%v)", vl, err)
	}

	// Failures.
	check(t, []string{"template", "get", "nope"}, result{Code: 1, Stderr: "agent2env template: get template nope: Template 'nope' not found (TEMPLATE_NOT_FOUND, HTTP 404)\n"})
	check(t, []string{"template", "get", "py", "--version", "9"}, result{Code: 1, Stderr: "VERSION_NOT_FOUND, HTTP 404"})
	check(t, []string{"template", "rollback", "py", "--to", "9"}, result{Code: 1, Stderr: "HTTP 404"})
	other := writeFile(t, "other.json", `{"name":"other","spec":{"image":"x"}}`)
	check(t, []string{"template", "update", "py", "-f", other}, result{Code: 1, Stderr: `describes template "other", not "py"`})
	check(t, []string{"template", "rm", "py", "nope"}, result{Code: 1, Stdout: "py\n", Stderr: "delete template nope: Template 'nope' not found"})
}

// TestTemplateCreateStdinPrepull creates from standard input with --prepull
// and checks that the daemon started a prepull for the image.
func TestTemplateCreateStdinPrepull(t *testing.T) {
	d := newTemplateDaemon(t)
	code, stdout, stderr := runIn(t, `{"name":"js","isPublic":false,"spec":{"image":"node:22"}}`,
		"template", "create", "-f", "-", "--prepull", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var tpl api.Template
	if err := json.Unmarshal([]byte(stdout), &tpl); err != nil || tpl.Name != "js" || tpl.IsPublic {
		t.Errorf("created %+v (%v), want js, not public", tpl, err)
	}
	tasks, err := d.cl.Prepull.List(t.Context(), "node:22", "")
	if err != nil || len(tasks) != 1 || tasks[0].Template != "js" {
		t.Errorf("prepull tasks %+v (%v), want one for node:22 and template js", tasks, err)
	}
}

// getTemplate returns a template through the CLI's --json output.
func getTemplate(t *testing.T, name string) api.Template {
	t.Helper()
	code, out, stderr := run(t, "template", "get", name, "--json")
	var tpl api.Template
	if err := json.Unmarshal([]byte(out), &tpl); code != 0 || err != nil {
		t.Fatalf("template get %s --json: exit %d, %v\n%s", name, code, err, stderr)
	}
	return tpl
}

// stripLine replaces the rest of the line starting with prefix.
func stripLine(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			lines[i] = l[:len(l)-len(strings.TrimLeft(l[len(prefix):], " "))] + "<time>"
		}
	}
	return strings.Join(lines, "\n")
}

func TestTemplateFiles(t *testing.T) {
	tests := []struct {
		name    string
		file    string // the file's name decides its format
		content string
		want    *templateFile
		err     string
	}{
		{
			name: "yaml as exported",
			file: "t.yaml",
			content: "apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata:\n    name: py\n    displayName: \"\"\n    description: \"\"\n" +
				"    tags: []\n    isPublic: false\nspec:\n    image: python\n    resources:\n        cpu: 500m\n        memory: 512Mi\n" +
				"    ttl: 0\n    startupTimeout: 300\n    readinessProbe:\n        exec:\n            command: [true]\n" +
				"        initialDelaySeconds: 1\n        periodSeconds: 10\n        failureThreshold: 3\n",
			want: &templateFile{Name: "py", Tags: []string{}, IsPublic: new(false), Spec: api.TemplateSpec{
				Image: "python", Resources: api.ResourceSpec{CPU: "500m", Memory: "512Mi"}, StartupTimeout: 300,
				ReadinessProbe: &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"true"}}, InitialDelaySeconds: 1, PeriodSeconds: 10, FailureThreshold: 3},
			}},
		},
		{
			name:    "yaml with lower-cased keys and no tags",
			file:    "t.yml",
			content: "---\nkind: SandboxTemplate\nmetadata: {name: py, displayname: Py}\nspec:\n  image: python\n  readinessprobe: {exec: {command: [x]}, periodseconds: 5}\n  network: {allowinternetaccess: true}\n---\n",
			want: &templateFile{Name: "py", DisplayName: "Py", Spec: api.TemplateSpec{Image: "python",
				ReadinessProbe: &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"x"}}, PeriodSeconds: 5},
				Network:        &api.NetworkSpec{AllowInternetAccess: true}}},
		},
		{
			name:    "env keys keep their case",
			file:    "t.yaml",
			content: "kind: SandboxTemplate\nmetadata: {name: py}\nspec: {image: python, env: {startupscript: x}}\n",
			want:    &templateFile{Name: "py", Spec: api.TemplateSpec{Image: "python", Env: map[string]string{"startupscript": "x"}}},
		},
		{
			name:    "json",
			file:    "t.json",
			content: `{"name":"py","displayName":"P","tags":["a"],"spec":{"image":"python","ttl":60},"autoPrepull":true,"changelog":"c"}`,
			want: &templateFile{Name: "py", DisplayName: "P", Tags: []string{"a"}, Spec: api.TemplateSpec{Image: "python", TTL: 60},
				AutoPrepull: true, Changelog: "c"},
		},
		{
			name:    "json sniffed without an extension",
			file:    "t",
			content: "  {\"name\":\"py\",\"spec\":{\"image\":\"python\"}}\n",
			want:    &templateFile{Name: "py", Spec: api.TemplateSpec{Image: "python"}},
		},
		{
			name: "json as exported",
			file: "t.json",
			content: `{"apiVersion":"liteboxd/v1","kind":"SandboxTemplate","metadata":{"description":"","displayName":"","name":"py",` +
				`"tags":["a"]},"spec":{"image":"python","resources":{"cpu":"500m","memory":"512Mi"},"startupTimeout":300,"ttl":60}}` + "\n",
			want: &templateFile{Name: "py", Tags: []string{"a"}, Spec: api.TemplateSpec{
				Image: "python", Resources: api.ResourceSpec{CPU: "500m", Memory: "512Mi"}, StartupTimeout: 300, TTL: 60}},
		},
		{name: "json list as exported", file: "t.json", content: `{"apiVersion":"liteboxd/v1","kind":"SandboxTemplateList","items":[]}`,
			err: `use "agent2env import"`},
		{name: "json document of another kind", file: "t", content: `{"kind":"Pod"}`, err: `kind "Pod"`},
		{name: "misspelt yaml key", file: "t.yaml", content: "kind: SandboxTemplate\nmetadata: {name: py}\nspec: {image: python, startupScrpt: x}\n",
			err: "unknown field startupScrpt"},
		{name: "yaml value of the wrong kind", file: "t.yaml", content: "kind: SandboxTemplate\nmetadata: {name: py}\nspec: {image: python, ttl: long}\n",
			err: `invalid YAML format: ttl must be a whole number, not "long"`},
		{name: "misspelt json key", file: "t.json", content: `{"name":"py","spec":{"image":"python","tll":5}}`, err: `unknown field "tll"`},
		{name: "list", file: "t.yaml", content: "kind: SandboxTemplateList\nitems: []\n", err: `use "agent2env import"`},
		{name: "two documents", file: "t.yaml", content: "kind: SandboxTemplate\n---\nkind: SandboxTemplate\n", err: "more than one YAML document"},
		{name: "no kind", file: "t.yaml", content: "metadata: {name: py}\n", err: "kind is missing"},
		{name: "other kind", file: "t.yaml", content: "kind: Pod\n", err: `kind "Pod"`},
		{name: "other apiVersion", file: "t.yaml", content: "apiVersion: v2\nkind: SandboxTemplate\n", err: `apiVersion "v2"`},
		{name: "empty", file: "t.yaml", content: "", err: "no SandboxTemplate document"},
		{name: "not yaml", file: "t.yaml", content: "kind: [\n", err: "yaml:"},
		{name: "json value of the wrong kind", file: "t.json", content: `{"name":5,"spec":{"image":"python"}}`,
			err: ": name must be a string (got number)"},
		{name: "json spec value of the wrong kind", file: "t.json", content: `{"name":"py","spec":{"image":"python","ttl":"long"}}`,
			err: ": spec.ttl must be an integer (got string)"},
		{name: "json array for an object", file: "t.json", content: `{"name":"py","spec":[]}`,
			err: ": spec must be a JSON object (got array)"},
		{name: "json with trailing data", file: "t.json", content: `{"name":"py"} {}`, err: "data after the JSON object"},
		{name: "json that does not parse", file: "t.json", content: "{\n  \"name\": \"py\",\n  \"spec\": {image: \"python\"}\n}",
			err: `t.json: line 3, column 12: unexpected "i" where a member's name, a string in double quotes, should start`},
		{name: "json cut short", file: "t.json", content: `{"name":"py"`,
			err: `t.json: line 1, column 13: the JSON value is cut short`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readTemplateFile(writeFile(t, tt.file, tt.content), nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestImportExportCommands(t *testing.T) {
	d := newTemplateDaemon(t)
	d.create(t, "a", "alpine", "x")
	d.create(t, "b", "busybox", "y")
	d.create(t, "c", "python", "x")

	// Export filters by tag and by names, comma-separated or repeated.
	all := filepath.Join(t.TempDir(), "all.yaml")
	check(t, []string{"export", "--tag", "x", "-f", all}, result{})
	exported, err := os.ReadFile(all)
	if err != nil {
		t.Fatal(err)
	}
	// Templates stamped alike come in name order.
	if names := docNames(string(exported)); !cmp.Equal(names, []string{"a", "c"}) {
		t.Errorf("export --tag x named %v, want [a c]:\n%s", names, exported)
	}
	for _, args := range [][]string{{"--names", "a,b"}, {"--names", "a", "--names", "b"}} {
		_, out, _ := run(t, append([]string{"export"}, args...)...)
		if names := docNames(out); !cmp.Equal(names, []string{"a", "b"}) {
			t.Errorf("export %v named %v, want [a b]", args, names)
		}
	}

	// Importing the export back: every template exists.
	check(t, []string{"import", all, "--strategy", "create-only"}, result{Stdout: "" +
		"NAME   ACTION    VERSION   ERROR\n" +
		"a      skipped   -         template already exists (strategy=create-only)\n" +
		"c      skipped   -         template already exists (strategy=create-only)\n" +
		"\n2 templates: 0 created, 0 updated, 2 skipped, 0 failed\n"})
	check(t, []string{"import", all, "--prepull"}, result{Stdout: "" +
		"NAME   ACTION    VERSION   ERROR\n" +
		"a      updated   2         \n" +
		"c      updated   2         \n" +
		"\n2 templates: 0 created, 2 updated, 0 skipped, 0 failed\n" +
		"prepull started: alpine, python\n"})

	// One bad item fails the command, after the table.
	mixed := writeFile(t, "mixed.yaml", "apiVersion: liteboxd/v1\nkind: SandboxTemplateList\nitems:\n"+
		"  - kind: SandboxTemplate\n    metadata: {name: d}\n    spec: {image: debian}\n"+
		"  - kind: SandboxTemplate\n    metadata: {name: \"\"}\n    spec: {image: debian}\n")
	check(t, []string{"import", mixed}, result{Code: 1, Stdout: "" +
		"NAME   ACTION    VERSION   ERROR\n" +
		"d      created   1         \n" +
		"-      failed    -         template name is required\n" +
		"\n2 templates: 1 created, 0 updated, 0 skipped, 1 failed\n",
		Stderr: "agent2env import: templates failed to import: 1 of 2\n"})

	// Standard input, and JSON output.
	code, stdout, stderr := runIn(t, "kind: SandboxTemplate\nmetadata: {name: e}\nspec: {image: debian}\n",
		"import", "-", "--strategy", "update-only", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res api.ImportResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Skipped != 1 || res.Results[0].Name != "e" {
		t.Errorf("import - --json: %s (%v)", stdout, err)
	}

	check(t, []string{"import", writeFile(t, "bad.yaml", "kind: [\n")}, result{Code: 1, Stderr: "INVALID_YAML, HTTP 400"})
	check(t, []string{"import", filepath.Join(t.TempDir(), "absent.yaml")}, result{Code: 1, Stderr: "no such file or directory"})
}

// TestExportFormats checks that -o of the export commands is a format, as
// everywhere else, and -f a file, as for llm export; a file name given to
// -o is a usage error pointing to -f, not a file named after it.
func TestExportFormats(t *testing.T) {
	d := newTemplateDaemon(t)
	d.create(t, "a", "alpine", "x")
	dir := t.TempDir()
	t.Chdir(dir)
	tests := []struct {
		name string
		args []string
		code int
		// stdoutName is the template name standard output holds, in the
		// format: "" for nothing.
		stdoutName, format string
		stderr             string
	}{
		{name: "all, default YAML", args: []string{"export"}, stdoutName: "a", format: formatYAML},
		{name: "all, -o json", args: []string{"export", "-o", "json"}, stdoutName: "a", format: formatJSON},
		{name: "all, -o yaml", args: []string{"export", "-o", "yaml"}, stdoutName: "a", format: formatYAML},
		{name: "one, -o json", args: []string{"template", "export", "a", "-o", "json"}, stdoutName: "a", format: formatJSON},
		{name: "one, -o yaml", args: []string{"template", "export", "a", "-o", "yaml"}, stdoutName: "a", format: formatYAML},
		{name: "all, -o FILE", args: []string{"export", "-o", "all.yaml"}, code: 2,
			stderr: `invalid argument "all.yaml" for "-o, --output" flag: want json, yaml; to write a file, use -f all.yaml`},
		{name: "one, -o FILE", args: []string{"template", "export", "a", "-o", "a.yaml"}, code: 2, stderr: "use -f a.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.stderr)
			}
			if got := exportedName(t, stdout, tt.format); got != tt.stdoutName {
				t.Errorf("exported %q, want %q:\n%s", got, tt.stdoutName, stdout)
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("wrote %s, want no file", entries[0].Name())
			}
		})
	}

	// -f writes JSON too, and import reads it back.
	file := filepath.Join(dir, "all.json")
	check(t, []string{"export", "-o", "json", "-f", file}, result{})
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := exportedName(t, string(b), formatJSON); got != "a" {
		t.Errorf("-f in JSON: exported %q, want a:\n%s", got, b)
	}
	check(t, []string{"import", file, "--strategy", "create-only"}, result{Stdout: "" +
		"NAME   ACTION    VERSION   ERROR\n" +
		"a      skipped   -         template already exists (strategy=create-only)\n" +
		"\n1 template: 0 created, 0 updated, 1 skipped, 0 failed\n"})
}

// exportedName is the name of the template that out, an export of one
// template or a list of one, holds in format: "" when out is empty.
func exportedName(t *testing.T, out, format string) string {
	t.Helper()
	if out == "" {
		return ""
	}
	type doc struct {
		Metadata struct{ Name string }
		Items    []struct{ Metadata struct{ Name string } }
	}
	var d doc
	var err error
	if format == formatJSON {
		err = json.Unmarshal([]byte(out), &d)
	} else {
		err = yaml.Unmarshal([]byte(out), &d)
	}
	if err != nil {
		t.Fatalf("output is not %s: %v\n%s", format, err, out)
	}
	if len(d.Items) == 1 {
		return d.Items[0].Metadata.Name
	}
	return d.Metadata.Name
}

// docNames returns the metadata names in exported YAML, in order.
func docNames(s string) []string {
	var names []string
	for l := range strings.Lines(s) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(l), "name: "); ok {
			names = append(names, n)
		}
	}
	return names
}

func TestTemplateUsageErrors(t *testing.T) {
	file := writeFile(t, "t.yaml", pyYAML)
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"template"}, "usage: agent2env template <command>"},
		{[]string{"template", "bogus"}, `unknown command "bogus"`},
		{[]string{"template", "create"}, "need -f FILE"},
		{[]string{"template", "create", "-f", file, "extra"}, `unexpected argument "extra"`},
		{[]string{"template", "ls", "--page", "0"}, "--page must be at least 1"},
		{[]string{"template", "ls", "--page-size", "101"}, "--page-size must be between 1 and 100"},
		{[]string{"template", "ls", "x"}, `unexpected argument "x"`},
		{[]string{"template", "get"}, "need one template NAME"},
		{[]string{"template", "get", "py", "--version", "x"}, `invalid argument "x" for "--version" flag`},
		{[]string{"template", "update", "py"}, "need -f FILE"},
		{[]string{"template", "update", "-f", file}, "need one template NAME"},
		{[]string{"template", "rm"}, "need at least one template NAME"},
		{[]string{"template", "versions"}, "need one template NAME"},
		{[]string{"template", "rollback", "py"}, "need --to N"},
		{[]string{"template", "rollback", "py", "--to", "0"}, "need --to N"},
		{[]string{"template", "export"}, "need one template NAME"},
		{[]string{"template", "export", "py", "--version", "-1"}, "--version must be at least 1"},
		{[]string{"template", "get", "py", "--version", "0"}, "--version must be at least 1"},
		{[]string{"import"}, "need one FILE"},
		{[]string{"import", file, "--strategy", "replace"}, `--strategy "replace"`},
		{[]string{"export", "x"}, `unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			d := newTemplateDaemon(t)
			checkUsageError(t, &d.recorder, tt.args, tt.stderr)
		})
	}
}

func TestTemplateListPages(t *testing.T) {
	d := newTemplateDaemon(t)
	for _, n := range []string{"a", "b", "c"} {
		d.create(t, n, "alpine", "x")
	}
	check(t, []string{"template", "ls", "--page-size", "2", "--search", ""}, result{Stdout: "" +
		"NAME   VERSION   IMAGE    TAGS   UPDATED   DESCRIPTION\n" +
		"a      1         alpine   x      3h        \n" +
		"b      1         alpine   x      3h        \n",
		Stderr: "page 1 of 2 (3 templates); next: --page 2\n"})
	code, stdout, stderr := run(t, "template", "ls", "--page-size", "2", "--page", "2")
	if code != 0 || stdout != "NAME   VERSION   IMAGE    TAGS   UPDATED   DESCRIPTION\nc      1         alpine   x      3h        \n" || stderr != "" {
		t.Errorf("page 2: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	_, out, _ := run(t, "template", "ls", "--json", "--tag", "x", "--page-size", "1", "--page", "3")
	var l api.TemplateList
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Total != 3 || l.Page != 3 || l.PageSize != 1 || len(l.Items) != 1 || l.Items[0].Name != "c" {
		t.Errorf("ls --json page 3: %s (%v)", out, err)
	}
}
