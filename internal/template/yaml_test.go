package template

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/store"
)

// fullSpec uses every field of a spec.
func fullSpec() api.TemplateSpec {
	return api.TemplateSpec{
		Image: "python:3.11-slim", Command: []string{"python"}, Args: []string{"-m", "http.server"},
		Resources: api.ResourceSpec{CPU: "1", Memory: "1Gi"}, TTL: 3600, Env: map[string]string{"B": "two", "A": "1"},
		StartupScript: "pip install numpy", StartupTimeout: 120,
		Files:            []api.FileSpec{{Destination: "/etc/motd", Content: "hello\n"}, {Source: "https://example.com/x", Destination: "/x"}},
		ReadinessProbe:   &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"test", "-f", "/ready"}}, InitialDelaySeconds: 1},
		Network:          &api.NetworkSpec{AllowInternetAccess: true, AllowedDomains: []string{"pypi.org"}},
		Persistence:      &api.PersistenceSpec{Enabled: true, StorageClassName: "standard"},
		RuntimeClassName: "gvisor",
	}
}

// fullYAML is the export of template "full" with fullSpec: LiteBoxd's
// layout (yaml.v3, 4-space indent, camelCase keys, field order of the wire
// doc).
const fullYAML = `apiVersion: liteboxd/v1
kind: SandboxTemplate
metadata:
    name: full
    displayName: Full
    description: every field
    tags:
        - a
        - b
spec:
    image: python:3.11-slim
    command:
        - python
    args:
        - -m
        - http.server
    resources:
        cpu: "1"
        memory: 1Gi
    ttl: 3600
    env:
        A: "1"
        B: two
    startupScript: pip install numpy
    startupTimeout: 120
    files:
        - destination: /etc/motd
          content: |
            hello
        - source: https://example.com/x
          destination: /x
    readinessProbe:
        exec:
            command:
                - test
                - -f
                - /ready
        initialDelaySeconds: 1
        periodSeconds: 10
        failureThreshold: 3
    network:
        allowInternetAccess: true
        allowedDomains:
            - pypi.org
    persistence:
        enabled: true
        mode: rootfs-overlay
        size: 1Gi
        storageClassName: standard
        reclaimPolicy: Delete
    runtimeClassName: gvisor
`

func TestExportYAML(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.svc.Create(ctx, api.CreateTemplateRequest{Name: "full", DisplayName: "Full", Description: "every field",
		Tags: []string{"a", "b"}, Spec: fullSpec()}); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.ExportYAML(ctx, "full", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fullYAML, string(got)); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}

	// A minimal template: empty metadata is still written, tags as [].
	f.create(t, "bare", "alpine")
	if _, err := f.svc.Update(ctx, "bare", api.UpdateTemplateRequest{Spec: api.TemplateSpec{Image: "busybox", TTL: 60}}); err != nil {
		t.Fatal(err)
	}
	const bareV1 = `apiVersion: liteboxd/v1
kind: SandboxTemplate
metadata:
    name: bare
    displayName: ""
    description: ""
    tags: []
spec:
    image: alpine
    resources:
        cpu: 500m
        memory: 512Mi
    ttl: 0
    startupTimeout: 300
`
	for _, v := range []int{1} {
		got, err := f.svc.ExportYAML(ctx, "bare", v)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(bareV1, string(got)); diff != "" {
			t.Errorf("export of version %d (-want +got):\n%s", v, diff)
		}
	}
	for _, v := range []int{0, -1, 2} {
		got, err := f.svc.ExportYAML(ctx, "bare", v)
		if err != nil || !strings.Contains(string(got), "image: busybox\n") || !strings.Contains(string(got), "ttl: 60\n") {
			t.Errorf("export version %d = %s, %v; want the latest", v, got, err)
		}
	}

	_, err = f.svc.ExportYAML(ctx, "nope", 0)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeTemplateNotFound)
	_, err = f.svc.ExportYAML(ctx, "bare", 3)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeTemplateNotFound)
	if err != nil && err.Error() != "version 3 not found" {
		t.Errorf("message %q", err)
	}
}

// listNames returns the metadata names of an exported list.
func listNames(t *testing.T, b []byte) []string {
	t.Helper()
	var l struct {
		APIVersion string    `yaml:"apiVersion"`
		Kind       string    `yaml:"kind"`
		ExportedAt time.Time `yaml:"exportedAt"`
		Items      []document
	}
	if err := yaml.Unmarshal(b, &l); err != nil {
		t.Fatalf("export is not YAML: %v\n%s", err, b)
	}
	if l.APIVersion != "liteboxd/v1" || l.Kind != "SandboxTemplateList" || !l.ExportedAt.Equal(epoch) {
		t.Errorf("list header: %q %q %v", l.APIVersion, l.Kind, l.ExportedAt)
	}
	names := []string{}
	for _, it := range l.Items {
		if it.APIVersion != "liteboxd/v1" || it.Kind != "SandboxTemplate" {
			t.Errorf("item %s: %q %q", it.Metadata.Name, it.APIVersion, it.Kind)
		}
		names = append(names, it.Metadata.Name)
	}
	return names
}

func TestExportAll(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	// More than LiteBoxd's 20: all are exported, the oldest too.
	for i := range 25 {
		tags := []string{"all"}
		if i == 0 || i == 24 {
			tags = append(tags, "Edge")
		}
		f.create(t, fmt.Sprintf("t%02d", i), "alpine", tags...)
		f.clock.Advance(time.Second)
	}
	f.clock.t = epoch
	all := []string{}
	for i := 24; i >= 0; i-- {
		all = append(all, fmt.Sprintf("t%02d", i))
	}
	tests := []struct {
		name  string
		tag   string
		names []string
		want  []string
	}{
		{"all", "", nil, all},
		{"tag", "edge", nil, []string{"t24", "t00"}},
		{"names", "", []string{"t00", "t03", "nope"}, []string{"t03", "t00"}},
		{"tag and names", "edge", []string{"t00", "t03"}, []string{"t00"}},
		{"nothing", "nope", nil, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := f.svc.ExportAll(ctx, tt.tag, tt.names)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, listNames(t, b)); diff != "" {
				t.Errorf("exported (-want +got):\n%s", diff)
			}
		})
	}
	b, _ := f.svc.ExportAll(ctx, "nope", nil)
	if !strings.Contains(string(b), "items: []\n") {
		t.Errorf("empty export:\n%s", b)
	}
}

// sameTemplate compares what an export carries: everything but ids,
// times and version numbers.
var sameTemplate = cmpopts.IgnoreFields(api.Template{}, "ID", "CreatedAt", "UpdatedAt", "LatestVersion")

func allTemplates(t *testing.T, svc *Service) []api.Template {
	t.Helper()
	l, err := svc.List(context.Background(), ListOptions{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// Export then import into an empty store gives the same templates, by
// each export form.
func TestExportImportRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := newFixture(t)
	private := false
	reqs := []api.CreateTemplateRequest{
		{Name: "full", DisplayName: "Full", Description: "every field", Tags: []string{"a", "b"}, Spec: fullSpec()},
		{Name: "private", IsPublic: &private, Spec: api.TemplateSpec{Image: "alpine"}},
		{Name: "odd-text", DisplayName: "yes", Description: "multi\nline: with # and ---\n...\n", Tags: []string{"null", "123", "true", ""},
			Spec: api.TemplateSpec{Image: "docker.io/library/alpine@sha256:" + strings.Repeat("a", 64), StartupScript: "set -e\necho 'hi'\n",
				Env: map[string]string{"EMPTY": "", "YES": "yes", "NUM": "007", "UNICODE": "ü→✓"}}},
	}
	for _, r := range reqs {
		src.clock.Advance(time.Second)
		if _, err := src.svc.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// A later version is what gets exported.
	if _, err := src.svc.Update(ctx, "private", api.UpdateTemplateRequest{Spec: api.TemplateSpec{Image: "alpine:3.20", TTL: 10}}); err != nil {
		t.Fatal(err)
	}
	want := allTemplates(t, src.svc)

	var singles []string
	for _, tpl := range want {
		b, err := src.svc.ExportYAML(ctx, tpl.Name, 0)
		if err != nil {
			t.Fatal(err)
		}
		singles = append(singles, string(b))
	}
	list, err := src.svc.ExportAll(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string][]string{
		"list":                 {string(list)},
		"single documents":     singles,
		"multi-document":       {"---\n" + strings.Join(singles, "---\n") + "...\n"},
		"list in a multi-doc":  {"# exported\n---\n" + string(list) + "---\n"},
		"singles, reversed":    {singles[2], singles[1], singles[0]},
		"list after a comment": {"# templates\n" + string(list)},
	}
	for name, docs := range forms {
		t.Run(name, func(t *testing.T) {
			dst := newFixture(t)
			created := 0
			for _, doc := range docs {
				res, err := dst.svc.Import(ctx, []byte(doc), "", false)
				if err != nil {
					t.Fatalf("import: %v\n%s", err, doc)
				}
				created += res.Created
				if res.Failed != 0 {
					t.Fatalf("import failures: %+v", res)
				}
			}
			if created != len(want) {
				t.Errorf("created %d, want %d", created, len(want))
			}
			got := allTemplates(t, dst.svc)
			if diff := cmp.Diff(want, got, sameTemplate, cmpopts.SortSlices(func(a, b api.Template) bool { return a.Name < b.Name })); diff != "" {
				t.Errorf("imported templates (-want +got):\n%s", diff)
			}
			// And the import's export is the same document.
			for _, tpl := range want {
				a, _ := src.svc.ExportYAML(ctx, tpl.Name, 0)
				b, err := dst.svc.ExportYAML(ctx, tpl.Name, 0)
				if err != nil || string(a) != string(b) {
					t.Errorf("re-export of %s differs (%v):\n%s\n---\n%s", tpl.Name, err, a, b)
				}
			}
		})
	}
}

// TestExportImportOddStrings exports templates whose every text field
// holds a string yaml.v3 writes, by itself, in a form it cannot read back
// (a literal block with an indentation indicator; "<<", a merge key):
// the export must import as the same template.
func TestExportImportOddStrings(t *testing.T) {
	ctx := context.Background()
	tests := []struct{ name, s string }{
		{"leading spaces", "  lead\nx"},
		{"leading tab", "\tlead\nx"},
		{"leading line break", "\nlead"},
		{"only a line break", "\n"},
		{"line breaks then a directive", "\n%x\n"},
		{"leading unicode line separator", "\u2028\n,"},
		{"merge key", "<<"},
		{"plain script", "set -e\necho hi\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			src, dst := newFixture(t), newFixture(t)
			spec := api.TemplateSpec{Image: "alpine", Command: []string{s}, Args: []string{s}, StartupScript: s,
				Env:            map[string]string{s: s},
				Files:          []api.FileSpec{{Destination: "/f", Content: s}},
				ReadinessProbe: &api.ProbeSpec{Exec: api.ExecAction{Command: []string{s}}}}
			if _, err := src.svc.Create(ctx, api.CreateTemplateRequest{Name: "t", DisplayName: s, Description: s, Tags: []string{s}, Spec: spec}); err != nil {
				t.Fatal(err)
			}
			for _, export := range []func() ([]byte, error){
				func() ([]byte, error) { return src.svc.ExportYAML(ctx, "t", 0) },
				func() ([]byte, error) { return src.svc.ExportAll(ctx, "", nil) },
			} {
				b, err := export()
				if err != nil {
					t.Fatal(err)
				}
				res, err := dst.svc.Import(ctx, b, "", false)
				if err != nil || res.Failed != 0 {
					t.Fatalf("import: %v %+v\n%s", err, res, b)
				}
				if diff := cmp.Diff(allTemplates(t, src.svc), allTemplates(t, dst.svc), sameTemplate); diff != "" {
					t.Errorf("imported template (-want +got):\n%s\n%s", diff, b)
				}
			}
		})
	}
}

// TestMarshalYAMLAsYAMLv3: what yaml.v3 writes readably, marshalYAML
// writes the same, mappings' keys in the same order.
func TestMarshalYAMLAsYAMLv3(t *testing.T) {
	spec := fullSpec()
	spec.Env = map[string]string{"A10": "x", "A9": "yes", "a": "007", "B": "", "_x": "1:20", "a01": "on", "a1": "~", "1": "é", "10": "2", "2": "[x]"}
	spec.StartupScript = "set -e\necho 'hi' # there\n"
	private := &store.Template{Name: "py", DisplayName: "null", Description: "a: b\nc", Tags: []string{"true", "1.5"}}
	for name, v := range map[string]any{
		"document": toDocument(private, spec),
		"list":     listDocument{APIVersion: api.YAMLAPIVersion, Kind: api.KindList, ExportedAt: epoch, Items: []document{toDocument(private, spec)}},
	} {
		want, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalYAML(v)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: marshalYAML (%v):\n%s\nyaml.v3:\n%s", name, err, got, want)
		}
	}
}

// TestMarshalYAMLReadsBack encodes strings made of what YAML gives a
// meaning to, at the top of a mapping, in a sequence and as a mapping's
// key and value: each must decode as itself.
func TestMarshalYAMLReadsBack(t *testing.T) {
	atoms := []string{" ", "\n", "\t", "\r", "a", "#", ":", "-", "'", "\"", "<<", "|", ">", "?", "&", "*", "!", "%",
		"@", "\u0085", "\u2028", "\ufeff", "é", "0", "~", ",", "[", "{", "---", "...", "\x1b"}
	r := rand.New(rand.NewPCG(1, 2))
	type doc struct {
		S string            `yaml:"s"`
		L []string          `yaml:"l"`
		M map[string]string `yaml:"m"`
	}
	for range 3000 {
		var b strings.Builder
		for n := r.IntN(6); n >= 0; n-- {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		want := doc{S: b.String(), L: []string{b.String()}, M: map[string]string{b.String(): b.String()}}
		out, err := marshalYAML(want)
		if err != nil {
			t.Fatalf("%q: %v", want.S, err)
		}
		var got doc
		if err := yaml.Unmarshal(out, &got); err != nil || !cmp.Equal(want, got) {
			t.Errorf("%q: decoded %+v, %v\n%s", want.S, got, err, out)
		}
	}
}

// importDoc is a single template document.
func importDoc(name, image string) string {
	return fmt.Sprintf("apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata:\n    name: %s\n    displayName: Imported %s\nspec:\n    image: %s\n", name, name, image)
}

func TestImportStrategies(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		strategy string
		exists   bool
		want     api.ImportResultItem
		version  int    // latest version afterwards; 0: no template
		display  string // display name afterwards
	}{
		{"create-only", false, api.ImportResultItem{Name: "t", Action: "created", Version: 1}, 1, "Imported t"},
		{"create-only", true, api.ImportResultItem{Name: "t", Action: "skipped", Error: "template already exists (strategy=create-only)"}, 1, "Old"},
		{"update-only", false, api.ImportResultItem{Name: "t", Action: "skipped", Error: "template not found (strategy=update-only)"}, 0, ""},
		{"update-only", true, api.ImportResultItem{Name: "t", Action: "updated", Version: 2}, 2, "Imported t"},
		{"create-or-update", false, api.ImportResultItem{Name: "t", Action: "created", Version: 1}, 1, "Imported t"},
		{"create-or-update", true, api.ImportResultItem{Name: "t", Action: "updated", Version: 2}, 2, "Imported t"},
		{"", false, api.ImportResultItem{Name: "t", Action: "created", Version: 1}, 1, "Imported t"},
		{"", true, api.ImportResultItem{Name: "t", Action: "updated", Version: 2}, 2, "Imported t"},
		{"replace", false, api.ImportResultItem{Name: "t", Action: "failed", Error: "invalid strategy: replace"}, 0, ""},
		{"replace", true, api.ImportResultItem{Name: "t", Action: "failed", Error: "invalid strategy: replace"}, 1, "Old"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/exists=%v", tt.strategy, tt.exists), func(t *testing.T) {
			f := newFixture(t)
			if tt.exists {
				if _, err := f.svc.Create(ctx, api.CreateTemplateRequest{Name: "t", DisplayName: "Old", Description: "kept",
					Tags: []string{"kept"}, Spec: api.TemplateSpec{Image: "alpine"}}); err != nil {
					t.Fatal(err)
				}
			}
			res, err := f.svc.Import(ctx, []byte(importDoc("t", "busybox")), tt.strategy, false)
			if err != nil {
				t.Fatal(err)
			}
			want := &api.ImportResult{Total: 1, Results: []api.ImportResultItem{tt.want}}
			switch tt.want.Action {
			case "created":
				want.Created = 1
			case "updated":
				want.Updated = 1
			case "skipped":
				want.Skipped = 1
			case "failed":
				want.Failed = 1
			}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			got, err := f.svc.Get(ctx, "t")
			if tt.version == 0 {
				checkErr(t, err, errdefs.ErrNotFound, api.CodeTemplateNotFound)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.LatestVersion != tt.version || got.DisplayName != tt.display {
				t.Errorf("template: version %d, display %q; want %d, %q", got.LatestVersion, got.DisplayName, tt.version, tt.display)
			}
			if tt.want.Action == "updated" {
				// PUT semantics: absent description and tags are kept.
				if got.Description != "kept" || !cmp.Equal(got.Tags, []string{"kept"}) || got.Spec.Image != "busybox" {
					t.Errorf("updated template %+v", got)
				}
				v, _ := f.svc.Version(ctx, "t", 2)
				if v == nil || v.Changelog != "Imported from YAML" {
					t.Errorf("version 2 = %+v; want changelog \"Imported from YAML\"", v)
				}
			}
		})
	}
}

// Each item succeeds or fails alone, in document order.
func TestImportPartialFailure(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	doc := `apiVersion: liteboxd/v1
kind: SandboxTemplateList
items:
  - metadata: {name: good-one}
    spec: {image: alpine}
  - metadata: {name: no-image}
    spec: {ttl: 5}
  - metadata: {displayName: nameless}
    spec: {image: alpine}
  - metadata: {name: Bad_Name}
    spec: {image: alpine}
  - metadata: {name: wrong-type}
    spec: {image: alpine, ttl: soon}
  - kind: Pod
    metadata: {name: wrong-kind}
    spec: {image: alpine}
  - apiVersion: v2
    metadata: {name: wrong-version}
    spec: {image: alpine}
  - just a string
  - metadata: [not, a, map]
  - metadata: {name: bad-spec}
    spec: {image: alpine, files: [{destination: /x}]}
  - metadata: {name: good-one}
    spec: {image: busybox}
  - metadata: {name: good-two}
    spec: {image: busybox, resources: {cpu: "2"}}
`
	res, err := f.svc.Import(ctx, []byte(doc), "create-or-update", false)
	if err != nil {
		t.Fatal(err)
	}
	want := &api.ImportResult{Total: 12, Created: 2, Updated: 1, Failed: 9, Results: []api.ImportResultItem{
		{Name: "good-one", Action: "created", Version: 1},
		{Name: "no-image", Action: "failed", Error: "invalid spec: image is required"},
		{Name: "", Action: "failed", Error: "template name is required"},
		{Name: "Bad_Name", Action: "failed", Error: "invalid name: name must consist of lowercase letters, numbers, and hyphens, and must start and end with a letter or number"},
		{Name: "wrong-type", Action: "failed", Error: "X"},
		{Name: "wrong-kind", Action: "failed", Error: "invalid kind: expected SandboxTemplate, got Pod"},
		{Name: "wrong-version", Action: "failed", Error: "invalid apiVersion: expected liteboxd/v1, got v2"},
		{Name: "", Action: "failed", Error: "X"},
		{Name: "", Action: "failed", Error: "X"},
		{Name: "bad-spec", Action: "failed", Error: "invalid spec: files[0] (/x): exactly one of content and source is required"},
		{Name: "good-one", Action: "updated", Version: 2},
		{Name: "good-two", Action: "created", Version: 1},
	}}
	// YAML decoder messages are the library's: check only their start.
	for i, r := range res.Results {
		if i < len(want.Results) && want.Results[i].Error == "X" {
			if !strings.HasPrefix(r.Error, "invalid YAML: ") {
				t.Errorf("item %d error %q: want an \"invalid YAML: ...\" message", i, r.Error)
			}
			want.Results[i].Error = r.Error
		}
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	// Same creation time (the test clock stands still): by name.
	if diff := cmp.Diff([]string{"good-one", "good-two"}, f.names(t)); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// Errors of the YAML or of a document's kind fail the whole import, and
// nothing is stored, even from documents before the bad one.
func TestImportDocumentErrors(t *testing.T) {
	ctx := context.Background()
	good := importDoc("good", "alpine")
	tests := []struct {
		name string
		doc  string
		code string
		msg  string // prefix
	}{
		{"empty", "", api.CodeInvalidYAML, "invalid YAML format: no SandboxTemplate"},
		{"comment only", "# nothing\n", api.CodeInvalidYAML, "invalid YAML format: no SandboxTemplate"},
		{"separators only", "---\n---\n", api.CodeInvalidYAML, "invalid YAML format: no SandboxTemplate"},
		{"syntax", "kind: [SandboxTemplate\n", api.CodeInvalidYAML, "invalid YAML format: "},
		{"syntax after a good document", good + "---\nkind: {\n", api.CodeInvalidYAML, "invalid YAML format: "},
		{"tab indent", "kind: SandboxTemplate\nmetadata:\n\tname: x\n", api.CodeInvalidYAML, "invalid YAML format: "},
		{"not a mapping", "- kind: SandboxTemplate\n", api.CodeInvalidYAML, "invalid YAML format: document 1: "},
		{"scalar", "hello\n", api.CodeInvalidYAML, "invalid YAML format: document 1: "},
		{"kind not a string", "kind: {a: b}\n", api.CodeInvalidYAML, "invalid YAML format: document 1: "},
		{"items not a list", "kind: SandboxTemplateList\nitems: {a: b}\n", api.CodeInvalidYAML, "invalid YAML format: document 1: "},
		{"duplicate key", "kind: SandboxTemplate\nkind: SandboxTemplate\n", api.CodeInvalidYAML, "invalid YAML format: document 1: "},
		{"no kind", "metadata: {name: x}\nspec: {image: alpine}\n", api.CodeInvalidRequest, `document 1: invalid kind: expected SandboxTemplate or SandboxTemplateList, got ""`},
		{"other kind", "apiVersion: liteboxd/v1\nkind: Pod\n", api.CodeInvalidRequest, `document 1: invalid kind: expected SandboxTemplate or SandboxTemplateList, got "Pod"`},
		{"other kind after a good document", good + "---\nkind: Pod\n", api.CodeInvalidRequest, "document 2: invalid kind"},
		{"other apiVersion", "apiVersion: liteboxd/v2\nkind: SandboxTemplate\n", api.CodeInvalidRequest, "document 1: invalid apiVersion: expected liteboxd/v1, got liteboxd/v2"},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
			"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n" +
			"g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nkind: SandboxTemplate\nmetadata: {name: bomb}\nspec: {image: alpine, command: *g}\n",
			api.CodeInvalidYAML, "invalid YAML format: document 1: too many nodes, keys or aliases"},
		{"alias of its own anchor", "kind: SandboxTemplate\nmetadata: {name: a}\nspec: &s {image: alpine, args: [*s]}\n",
			api.CodeInvalidYAML, "invalid YAML format: document 1: too many nodes, keys or aliases"},
		// yaml.v3 checks a mapping for duplicate keys in quadratic time.
		{"huge mapping", "kind: SandboxTemplate\nmetadata: {name: env}\nspec: {image: alpine, env: {" + strings.Repeat("K: v, ", 12000) + "}}\n",
			api.CodeInvalidYAML, "invalid YAML format: document 1: too many nodes, keys or aliases"},
		{"big mapping aliased", "m: &m {" + strings.Repeat("K: v, ", 3000) + "}\nkind: SandboxTemplateList\nitems: [" +
			strings.Repeat("{spec: {env: *m}}, ", 20) + "]\n", api.CodeInvalidYAML, "invalid YAML format: document 1: too many nodes, keys or aliases"},
		{"too many items", "kind: SandboxTemplateList\nitems:\n" + strings.Repeat("- {}\n", MaxImportItems+1), api.CodeInvalidRequest,
			"too many templates: at most 10000 in one import"},
		{"too many documents", strings.Repeat(importDoc("a", "alpine")+"---\n", MaxImportItems+1), api.CodeInvalidRequest,
			"too many templates: at most 10000 in one import"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			res, err := f.svc.Import(ctx, []byte(tt.doc), "", true)
			if err == nil {
				t.Fatalf("import succeeded: %+v", res)
			}
			code := tt.code // INVALID_REQUEST is the class's own code, set at the edge
			if code == api.CodeInvalidRequest {
				code = ""
			}
			checkErr(t, err, errdefs.ErrInvalidArgument, code)
			if !strings.HasPrefix(err.Error(), tt.msg) {
				t.Errorf("message %q, want prefix %q", err, tt.msg)
			}
			if names := f.names(t); len(names) != 0 {
				t.Errorf("stored %v from a refused import", names)
			}
			if calls := f.pp.Calls(); len(calls) != 0 {
				t.Errorf("prepulls from a refused import: %v", calls)
			}
		})
	}
}

func TestImportForms(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		doc   string
		want  []api.ImportResultItem
		check func(t *testing.T, f *fixture)
	}{
		{"empty list", "apiVersion: liteboxd/v1\nkind: SandboxTemplateList\nitems: []\n", []api.ImportResultItem{}, nil},
		{"list without items", "kind: SandboxTemplateList\n", []api.ImportResultItem{}, nil},
		{"no apiVersion", "kind: SandboxTemplate\nmetadata: {name: a}\nspec: {image: alpine}\n",
			[]api.ImportResultItem{{Name: "a", Action: "created", Version: 1}}, nil},
		{"list items without kind", "kind: SandboxTemplateList\nitems:\n- metadata: {name: a}\n  spec: {image: alpine}\n",
			[]api.ImportResultItem{{Name: "a", Action: "created", Version: 1}}, nil},
		{"exportedAt ignored", "kind: SandboxTemplateList\nexportedAt: not a time\nitems:\n- metadata: {name: a}\n  spec: {image: alpine}\n",
			[]api.ImportResultItem{{Name: "a", Action: "created", Version: 1}}, nil},
		{"no metadata", "kind: SandboxTemplate\nspec: {image: alpine}\n",
			[]api.ImportResultItem{{Action: "failed", Error: "template name is required"}}, nil},
		{"no spec", "kind: SandboxTemplate\nmetadata: {name: a}\n",
			[]api.ImportResultItem{{Name: "a", Action: "failed", Error: "invalid spec: image is required"}}, nil},
		{"same name twice", importDoc("a", "alpine") + "---\n" + importDoc("a", "busybox"),
			[]api.ImportResultItem{{Name: "a", Action: "created", Version: 1}, {Name: "a", Action: "updated", Version: 2}}, nil},
		{"lower-case keys of old exports",
			"kind: SandboxTemplate\nmetadata: {name: old, displayname: Old}\nspec:\n  image: alpine\n  startupscript: echo hi\n  startuptimeout: 9\n" +
				"  readinessprobe: {exec: {command: [\"true\"]}, initialdelayseconds: 2, periodseconds: 3, failurethreshold: 4}\n" +
				"  network: {allowinternetaccess: true, alloweddomains: [x.org]}\n" +
				"  env: {startupscript: kept-as-env}\n",
			[]api.ImportResultItem{{Name: "old", Action: "created", Version: 1}},
			func(t *testing.T, f *fixture) {
				got, _ := f.svc.Get(ctx, "old")
				want := defaulted("alpine")
				want.StartupScript, want.StartupTimeout = "echo hi", 9
				want.ReadinessProbe = &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"true"}}, InitialDelaySeconds: 2, PeriodSeconds: 3, FailureThreshold: 4}
				want.Network = &api.NetworkSpec{AllowInternetAccess: true, AllowedDomains: []string{"x.org"}}
				want.Env = map[string]string{"startupscript": "kept-as-env"}
				if got == nil || got.DisplayName != "Old" || !cmp.Equal(&want, got.Spec) {
					t.Errorf("imported %+v; spec diff:\n%s", got, cmp.Diff(&want, got.Spec))
				}
			}},
		{"camelCase wins over lower-case", "kind: SandboxTemplate\nmetadata: {name: a}\nspec: {image: alpine, startupScript: camel, startupscript: lower}\n",
			[]api.ImportResultItem{{Name: "a", Action: "created", Version: 1}},
			func(t *testing.T, f *fixture) {
				if got, _ := f.svc.Get(ctx, "a"); got == nil || got.Spec.StartupScript != "camel" {
					t.Errorf("imported %+v", got)
				}
			}},
		{"anchors and aliases", "kind: SandboxTemplateList\nitems:\n- &base\n  metadata: {name: a}\n  spec: &spec {image: alpine, ttl: 7}\n" +
			"- metadata: {name: b}\n  spec: *spec\n",
			[]api.ImportResultItem{{Name: "a", Action: "created", Version: 1}, {Name: "b", Action: "created", Version: 1}},
			func(t *testing.T, f *fixture) {
				if got, _ := f.svc.Get(ctx, "b"); got == nil || got.Spec.TTL != 7 {
					t.Errorf("imported %+v", got)
				}
			}},
		{"tags null keeps, [] clears on update", "kind: SandboxTemplate\nmetadata: {name: a, tags: [x]}\nspec: {image: alpine}\n---\n" +
			"kind: SandboxTemplate\nmetadata: {name: a, tags: null}\nspec: {image: alpine}\n",
			[]api.ImportResultItem{{Name: "a", Action: "created", Version: 1}, {Name: "a", Action: "updated", Version: 2}},
			func(t *testing.T, f *fixture) {
				if got, _ := f.svc.Get(ctx, "a"); got == nil || !cmp.Equal(got.Tags, []string{"x"}) {
					t.Errorf("imported %+v", got)
				}
				if _, err := f.svc.Import(ctx, []byte("kind: SandboxTemplate\nmetadata: {name: a, tags: []}\nspec: {image: alpine}\n"), "", false); err != nil {
					t.Fatal(err)
				}
				if got, _ := f.svc.Get(ctx, "a"); got == nil || got.Tags == nil || len(got.Tags) != 0 {
					t.Errorf("after tags: [] %+v", got)
				}
			}},
		{"isPublic false", "kind: SandboxTemplate\nmetadata: {name: a, isPublic: false}\nspec: {image: alpine}\n",
			[]api.ImportResultItem{{Name: "a", Action: "created", Version: 1}},
			func(t *testing.T, f *fixture) {
				if got, _ := f.svc.Get(ctx, "a"); got == nil || got.IsPublic {
					t.Errorf("imported %+v", got)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			res, err := f.svc.Import(ctx, []byte(tt.doc), "", false)
			if err != nil {
				t.Fatal(err)
			}
			if res.Results == nil {
				t.Fatal("results is nil: clients require a list")
			}
			if diff := cmp.Diff(tt.want, res.Results); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if res.Total != len(tt.want) || res.Created+res.Updated+res.Skipped+res.Failed != res.Total {
				t.Errorf("counts %+v", res)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func TestImportPrepull(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.create(t, "exists", "alpine")
	f.pp.fail = map[string]error{
		"busy:1":   errdefs.WithCode(errdefs.Conflict("prepull already in progress"), "PREPULL_IN_PROGRESS"),
		"broken:1": errors.New("registry down"),
	}
	doc := importDoc("new-a", "python:3.11") + "---\n" + importDoc("exists", "python:3.11") + "---\n" +
		importDoc("bad", "") + "---\n" + importDoc("busy", "busy:1") + "---\n" + importDoc("broken", "broken:1")
	res, err := f.svc.Import(ctx, []byte(doc), "create-or-update", true)
	if err != nil {
		t.Fatal(err)
	}
	// Duplicates are listed, as by LiteBoxd; a pull already under way
	// counts as started, one that could not start does not.
	if diff := cmp.Diff([]string{"python:3.11", "python:3.11", "busy:1"}, res.PrepullStarted); diff != "" {
		t.Errorf("prepullStarted (-want +got):\n%s", diff)
	}
	wantCalls := []prepullCall{{"python:3.11", "new-a"}, {"python:3.11", "exists"}, {"busy:1", "busy"}, {"broken:1", "broken"}}
	if diff := cmp.Diff(wantCalls, f.pp.Calls()); diff != "" {
		t.Errorf("prepulls (-want +got):\n%s", diff)
	}
	if res.Created != 3 || res.Updated != 1 || res.Failed != 1 {
		t.Errorf("counts %+v", res)
	}

	// Skipped items are not prepulled; without prepull nothing is.
	f.pp.calls = nil
	res, err = f.svc.Import(ctx, []byte(doc), "create-only", true)
	if err != nil || res.Skipped != 4 || res.PrepullStarted != nil || len(f.pp.Calls()) != 0 {
		t.Errorf("create-only of existing: %+v, %v, calls %v", res, err, f.pp.Calls())
	}
	res, err = f.svc.Import(ctx, []byte(doc), "", false)
	if err != nil || res.PrepullStarted != nil || len(f.pp.Calls()) != 0 {
		t.Errorf("without prepull: %+v, %v, calls %v", res, err, f.pp.Calls())
	}
	// Without a prepuller, prepull is ignored.
	res, err = New(f.store).Import(ctx, []byte(doc), "", true)
	if err != nil || res.PrepullStarted != nil || res.Updated != 4 {
		t.Errorf("without a prepuller: %+v, %v", res, err)
	}
}

func TestParseDocument(t *testing.T) {
	exported, err := yaml.Marshal(toDocument(&store.Template{Name: "py", Tags: []string{"a"}}, fullSpec()))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		doc  string
		want *Document
		err  string // substring; the class is always ErrInvalidArgument
	}{
		{name: "as exported", doc: string(exported),
			want: &Document{Name: "py", Tags: []string{"a"}, IsPublic: new(bool), Spec: fullSpec()}},
		{name: "lower-cased keys, separators, no tags",
			doc: "---\nkind: SandboxTemplate\nmetadata: {name: py, displayname: Py}\nspec:\n  image: python\n" +
				"  readinessprobe: {exec: {command: [x]}, periodseconds: 5}\n  network: {allowinternetaccess: true}\n---\n",
			want: &Document{Name: "py", DisplayName: "Py", Spec: api.TemplateSpec{Image: "python",
				ReadinessProbe: &api.ProbeSpec{Exec: api.ExecAction{Command: []string{"x"}}, PeriodSeconds: 5},
				Network:        &api.NetworkSpec{AllowInternetAccess: true}}}},
		{name: "env keys keep their case", doc: "kind: SandboxTemplate\nspec: {image: python, env: {startupscript: x}}\n",
			want: &Document{Spec: api.TemplateSpec{Image: "python", Env: map[string]string{"startupscript": "x"}}}},
		{name: "literal blocks yaml.v3 writes back unreadably",
			doc:  "kind: SandboxTemplate\nspec:\n  image: alpine\n  command:\n  - |2-\n      lead\n    x\n  - \"<<\"\n  startupScript: |+\n\n",
			want: &Document{Spec: api.TemplateSpec{Image: "alpine", Command: []string{"  lead\nx", "<<"}, StartupScript: "\n"}}},
		{name: "misspelt key", doc: "kind: SandboxTemplate\nspec: {image: python, startupScrpt: x}\n", err: "unknown field startupScrpt"},
		{name: "a value of the wrong kind", doc: "kind: SandboxTemplate\nspec:\n  image: python\n  ttl: long\n", err: `ttl must be a whole number, not "long"`},
		{name: "list", doc: "kind: SandboxTemplateList\nitems: []\n", err: `use "agent2env import"`},
		{name: "two documents", doc: "kind: SandboxTemplate\n---\nkind: SandboxTemplate\n", err: "more than one YAML document"},
		{name: "no kind", doc: "metadata: {name: py}\n", err: "kind is missing"},
		{name: "other kind", doc: "kind: Pod\n", err: `kind "Pod"`},
		{name: "other apiVersion", doc: "apiVersion: v2\nkind: SandboxTemplate\n", err: `apiVersion "v2"`},
		{name: "empty", doc: "", err: "no SandboxTemplate document"},
		{name: "not a mapping", doc: "- a\n", err: "want a SandboxTemplate document"},
		{name: "not yaml", doc: "kind: [\n", err: "invalid YAML format"},
		{name: "alias bomb", doc: "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
			"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n" +
			"g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nkind: SandboxTemplate\nspec: {image: alpine, command: *g}\n",
			err: "too many nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDocument([]byte(tt.doc))
			if tt.err != "" {
				if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want ErrInvalidArgument with %q", err, tt.err)
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
