package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
	"github.com/agent2env/agent2env/internal/template"
)

// These tests serve the template routes on a Server without a manager or
// images (no sandbox route is called), over a sqlite store.

// tplPrepuller records the prepulls the template service asks for.
type tplPrepuller struct {
	mu    sync.Mutex
	calls []string // image@template
}

func (p *tplPrepuller) Prepull(ctx context.Context, image, tpl string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, image+"@"+tpl)
	return fmt.Sprintf("pp-%08x", len(p.calls)), nil
}

func (p *tplPrepuller) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{}, p.calls...)
}

// tplNow is the test clock of the template service.
var tplNow = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

const tplNowJSON = "2030-01-02T03:04:05.123456Z"

type tplEnv struct {
	h     http.Handler
	url   string
	store store.Store
	pp    *tplPrepuller
}

func newTemplateEnv(tb testing.TB) *tplEnv {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "state.db"))
	if err != nil {
		tb.Fatal(err)
	}
	pp := &tplPrepuller{}
	log := slog.New(slog.DiscardHandler)
	svc := template.New(st, template.WithPrepuller(pp), template.WithLogger(log),
		template.WithClock(func() time.Time { return tplNow }))
	srv := New(nil, nil, log, WithRoutes(NewTemplateRoutes(svc)))
	srv.SetReady(true)
	h := srv.Handler()
	ts := httptest.NewServer(h)
	tb.Cleanup(func() {
		ts.Close()
		st.Close()
	})
	return &tplEnv{h: h, url: ts.URL, store: st, pp: pp}
}

// pythonSDK sends a request as the LiteBoxd Python SDK (httpx) does:
// its default headers, and the JSON body with Content-Type set.
func (e *tplEnv) pythonSDK(tb testing.TB, method, path string, query url.Values, jsonBody string) response {
	tb.Helper()
	u := e.url + "/api/v1/" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if jsonBody != "" {
		body = strings.NewReader(jsonBody)
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("User-Agent", "liteboxd-python-sdk/0.1.0")
	req.Header.Set("Accept", "application/json")
	if jsonBody != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return e.send(tb, req)
}

func (e *tplEnv) send(tb testing.TB, req *http.Request) response {
	tb.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *tplEnv) do(tb testing.TB, method, path, ctype string, body io.Reader) response {
	tb.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		tb.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return e.send(tb, req)
}

// stored lists the names of the stored templates.
func (e *tplEnv) stored(tb testing.TB) []string {
	tb.Helper()
	ts, _, err := e.store.ListTemplates(context.Background(), store.TemplateFilter{})
	if err != nil {
		tb.Fatal(err)
	}
	names := []string{}
	for _, t := range ts {
		names = append(names, t.Name)
	}
	return names
}

// jsonObject decodes b as a JSON value for comparison with cmp.
func jsonObject(tb testing.TB, b []byte) any {
	tb.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatalf("%q is not JSON: %v", b, err)
	}
	return v
}

func checkJSON(tb testing.TB, what string, resp response, status int, want string) {
	tb.Helper()
	if resp.status != status {
		tb.Errorf("%s: status %d, want %d (body %s)", what, resp.status, status, resp.body)
	}
	if ct := resp.header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("%s: content type %q", what, ct)
	}
	if diff := cmp.Diff(jsonObject(tb, []byte(want)), jsonObject(tb, resp.body)); diff != "" {
		tb.Errorf("%s: body (-want +got):\n%s", what, diff)
	}
}

var tplIDPattern = regexp.MustCompile(`^tpl-[0-9a-f]{8}$`)

// templateID returns the id of the template in a JSON body, checking its
// form.
func templateID(tb testing.TB, body []byte) string {
	tb.Helper()
	var t struct{ ID string }
	json.Unmarshal(body, &t)
	if !tplIDPattern.MatchString(t.ID) {
		tb.Errorf("template id %q: want tpl-xxxxxxxx", t.ID)
	}
	return t.ID
}

// TestTemplateSeed003 replays the template walk-through of seed 003 §9.3
// as the Python SDK sends it: create (with autoPrepull), list by tag,
// export as YAML.
func TestTemplateSeed003(t *testing.T) {
	e := newTemplateEnv(t)
	// Another template, so that the tag filter has something to leave out.
	resp := e.pythonSDK(t, http.MethodPost, "templates", nil, `{"name":"go-template","tags":["go"],"spec":{"image":"golang:1.22"}}`)
	if resp.status != http.StatusCreated {
		t.Fatalf("setup: %d %s", resp.status, resp.body)
	}

	// client.template.create(CreateTemplateRequest(...)): pydantic's
	// model_dump(by_alias=True, exclude_none=True) fills in the model
	// defaults startupTimeout 300 (and ttl, given here).
	resp = e.pythonSDK(t, http.MethodPost, "templates", nil,
		`{"name":"my-python-template","displayName":"My Python Template","description":"Custom Python environment",`+
			`"tags":["python","custom"],"spec":{"image":"python:3.11-slim","resources":{"cpu":"1000m","memory":"1Gi"},`+
			`"ttl":7200,"startupScript":"pip install numpy pandas","startupTimeout":300},"autoPrepull":true}`)
	id := templateID(t, resp.body)
	tplJSON := `{"id":"` + id + `","name":"my-python-template","displayName":"My Python Template",
		"description":"Custom Python environment","tags":["python","custom"],"author":"","isPublic":true,
		"latestVersion":1,"createdAt":"` + tplNowJSON + `","updatedAt":"` + tplNowJSON + `",
		"spec":{"image":"python:3.11-slim","resources":{"cpu":"1000m","memory":"1Gi"},"ttl":7200,
			"startupScript":"pip install numpy pandas","startupTimeout":300}}`
	checkJSON(t, "create", resp, http.StatusCreated, tplJSON)
	if diff := cmp.Diff([]string{"python:3.11-slim@my-python-template"}, e.pp.Calls()); diff != "" {
		t.Errorf("autoPrepull (-want +got):\n%s", diff)
	}
	// What the SDK prints: "Created template: {name} v{latest_version}".
	var created api.Template
	json.Unmarshal(resp.body, &created)
	if got := fmt.Sprintf("Created template: %s v%d", created.Name, created.LatestVersion); got != "Created template: my-python-template v1" {
		t.Errorf("printed %q", got)
	}

	// client.template.list(tag="python"): page and pageSize are always sent.
	resp = e.pythonSDK(t, http.MethodGet, "templates", url.Values{"page": {"1"}, "pageSize": {"20"}, "tag": {"python"}}, "")
	checkJSON(t, "list", resp, http.StatusOK, `{"items":[`+tplJSON+`],"total":1,"page":1,"pageSize":20}`)

	// client.template.export_yaml("my-python-template"): no version param.
	resp = e.pythonSDK(t, http.MethodGet, "templates/my-python-template/export", nil, "")
	if resp.status != http.StatusOK || resp.header.Get("Content-Type") != "application/x-yaml" {
		t.Errorf("export: %d %q", resp.status, resp.header.Get("Content-Type"))
	}
	const wantYAML = `apiVersion: liteboxd/v1
kind: SandboxTemplate
metadata:
    name: my-python-template
    displayName: My Python Template
    description: Custom Python environment
    tags:
        - python
        - custom
spec:
    image: python:3.11-slim
    resources:
        cpu: 1000m
        memory: 1Gi
    ttl: 7200
    startupScript: pip install numpy pandas
    startupTimeout: 300
`
	if diff := cmp.Diff(wantYAML, string(resp.body)); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}
	if cd := resp.header.Get("Content-Disposition"); cd != "" {
		t.Errorf("Content-Disposition %q: LiteBoxd sends none", cd)
	}
}

// TestTemplateAPI walks every template route, success and failure, and
// checks each body in full.
func TestTemplateAPI(t *testing.T) {
	e := newTemplateEnv(t)
	ok := func(what string, resp response, status int) {
		t.Helper()
		if resp.status != status {
			t.Fatalf("%s: %d %s; want %d", what, resp.status, resp.body, status)
		}
	}
	resp := e.do(t, http.MethodPost, "/api/v1/templates", "application/json",
		strings.NewReader(`{"name":"web","spec":{"image":"nginx:1.25","env":{"A":"1"}}}`))
	ok("create", resp, http.StatusCreated)
	id := templateID(t, resp.body)
	spec1 := `{"image":"nginx:1.25","resources":{"cpu":"500m","memory":"512Mi"},"ttl":0,"env":{"A":"1"},"startupTimeout":300}`
	v1JSON := func(vid string) string {
		return `{"id":"` + vid + `","templateId":"` + id + `","version":1,"spec":` + spec1 +
			`,"changelog":"Initial version","createdBy":"","createdAt":"` + tplNowJSON + `"}`
	}
	checkJSON(t, "create", resp, http.StatusCreated, `{"id":"`+id+`","name":"web","displayName":"","description":"",
		"tags":[],"author":"","isPublic":true,"latestVersion":1,"createdAt":"`+tplNowJSON+`","updatedAt":"`+tplNowJSON+`",
		"spec":`+spec1+`}`)

	resp = e.do(t, http.MethodPost, "/api/v1/templates", "application/json", strings.NewReader(`{"name":"web","spec":{"image":"nginx"}}`))
	checkError(t, resp, http.StatusConflict, api.CodeTemplateExists)

	resp = e.do(t, http.MethodGet, "/api/v1/templates/web", "", nil)
	ok("get", resp, http.StatusOK)

	resp = e.do(t, http.MethodPut, "/api/v1/templates/web", "application/json",
		strings.NewReader(`{"displayName":"Web","tags":["http"],"isPublic":false,"spec":{"image":"nginx:1.27","ttl":60},"changelog":"bump"}`))
	spec2 := `{"image":"nginx:1.27","resources":{"cpu":"500m","memory":"512Mi"},"ttl":60,"startupTimeout":300}`
	checkJSON(t, "update", resp, http.StatusOK, `{"id":"`+id+`","name":"web","displayName":"Web","description":"",
		"tags":["http"],"author":"","isPublic":false,"latestVersion":2,"createdAt":"`+tplNowJSON+`","updatedAt":"`+tplNowJSON+`",
		"spec":`+spec2+`}`)

	resp = e.do(t, http.MethodGet, "/api/v1/templates/web/versions", "", nil)
	ok("versions", resp, http.StatusOK)
	var vl api.VersionList
	json.Unmarshal(resp.body, &vl)
	if len(vl.Items) != 2 || vl.Total != 2 || vl.Items[0].Version != 2 || vl.Items[1].Version != 1 {
		t.Fatalf("versions: %s", resp.body)
	}
	checkJSON(t, "versions", resp, http.StatusOK, `{"items":[{"id":"`+vl.Items[0].ID+`","templateId":"`+id+`","version":2,
		"spec":`+spec2+`,"changelog":"bump","createdBy":"","createdAt":"`+tplNowJSON+`"},`+v1JSON(vl.Items[1].ID)+`],"total":2}`)

	resp = e.do(t, http.MethodGet, "/api/v1/templates/web/versions/1", "", nil)
	checkJSON(t, "version 1", resp, http.StatusOK, v1JSON(vl.Items[1].ID))

	resp = e.do(t, http.MethodPost, "/api/v1/templates/web/rollback", "application/json", strings.NewReader(`{"targetVersion":1}`))
	checkJSON(t, "rollback", resp, http.StatusOK, `{"id":"`+id+`","name":"web","latestVersion":3,"rolledBackFrom":2,
		"rolledBackTo":1,"updatedAt":"`+tplNowJSON+`"}`)
	resp = e.do(t, http.MethodGet, "/api/v1/templates/web", "", nil)
	var got api.Template
	json.Unmarshal(resp.body, &got)
	if got.LatestVersion != 3 || got.Spec == nil || got.Spec.Image != "nginx:1.25" || got.DisplayName != "Web" {
		t.Errorf("after rollback: %s", resp.body)
	}

	resp = e.do(t, http.MethodGet, "/api/v1/templates/web/export?version=2abc", "", nil)
	if resp.status != http.StatusOK || !strings.Contains(string(resp.body), "image: nginx:1.27\n") {
		t.Errorf("export version 2abc (read as 2): %d %s", resp.status, resp.body)
	}
	resp = e.do(t, http.MethodGet, "/api/v1/templates/web/export?version=0", "", nil)
	if resp.status != http.StatusOK || !strings.Contains(string(resp.body), "image: nginx:1.25\n") {
		t.Errorf("export version 0 (the latest): %d %s", resp.status, resp.body)
	}

	errs := []struct {
		method, path, body string
		status             int
		code               string
		msg                string
	}{
		{"GET", "/api/v1/templates/nope", "", 404, api.CodeTemplateNotFound, "Template 'nope' not found"},
		{"PUT", "/api/v1/templates/nope", `{"spec":{"image":"alpine"}}`, 404, api.CodeTemplateNotFound, "Template 'nope' not found"},
		{"PUT", "/api/v1/templates/nope", `{"spec":{}}`, 400, api.CodeInvalidRequest, "invalid spec: image is required"},
		{"DELETE", "/api/v1/templates/nope", "", 404, api.CodeTemplateNotFound, "Template 'nope' not found"},
		{"GET", "/api/v1/templates/nope/versions", "", 404, api.CodeTemplateNotFound, "Template 'nope' not found"},
		{"GET", "/api/v1/templates/nope/versions/1", "", 404, api.CodeVersionNotFound, "Template 'nope' not found"},
		{"GET", "/api/v1/templates/web/versions/9", "", 404, api.CodeVersionNotFound, "version 9 not found"},
		{"GET", "/api/v1/templates/web/versions/1x", "", 400, api.CodeInvalidRequest, "Invalid version number"},
		{"POST", "/api/v1/templates/web/rollback", `{}`, 400, api.CodeInvalidRequest, "target version must be at least 1"},
		{"POST", "/api/v1/templates/web/rollback", `{"targetVersion":9}`, 404, api.CodeTemplateNotFound, "version 9 not found"},
		{"POST", "/api/v1/templates/nope/rollback", `{"targetVersion":1}`, 404, api.CodeTemplateNotFound, "Template 'nope' not found"},
		{"GET", "/api/v1/templates/web/export?version=abc", "", 400, api.CodeInvalidRequest, "invalid version number"},
		{"GET", "/api/v1/templates/web/export?version=9", "", 404, api.CodeTemplateNotFound, "version 9 not found"},
		{"GET", "/api/v1/templates/nope/export", "", 404, api.CodeTemplateNotFound, "Template 'nope' not found"},
	}
	for _, tt := range errs {
		t.Run(tt.method+" "+tt.path+" "+tt.body, func(t *testing.T) {
			var body io.Reader
			ctype := ""
			if tt.body != "" {
				body, ctype = strings.NewReader(tt.body), "application/json"
			}
			resp := e.do(t, tt.method, tt.path, ctype, body)
			checkError(t, resp, tt.status, tt.code)
			var eb api.Error
			json.Unmarshal(resp.body, &eb)
			if eb.Message != tt.msg {
				t.Errorf("message %q, want %q", eb.Message, tt.msg)
			}
		})
	}

	resp = e.do(t, http.MethodDelete, "/api/v1/templates/web", "", nil)
	if resp.status != http.StatusNoContent || len(resp.body) != 0 {
		t.Errorf("delete: %d %q; want 204 without a body", resp.status, resp.body)
	}
	resp = e.do(t, http.MethodGet, "/api/v1/templates/web", "", nil)
	checkError(t, resp, http.StatusNotFound, api.CodeTemplateNotFound)
}

func TestTemplateListQuery(t *testing.T) {
	e := newTemplateEnv(t)
	for i := range 3 {
		resp := e.do(t, http.MethodPost, "/api/v1/templates", "application/json",
			strings.NewReader(fmt.Sprintf(`{"name":"t%d","description":"Number %d","tags":["n%d"],"spec":{"image":"alpine"}}`, i, i, i%2)))
		if resp.status != http.StatusCreated {
			t.Fatal(resp.status, string(resp.body))
		}
	}
	tests := []struct {
		query                 string
		names                 []string
		total, page, pageSize int
	}{
		{"", []string{"t0", "t1", "t2"}, 3, 1, 20},
		{"?tag=n0", []string{"t0", "t2"}, 2, 1, 20},
		{"?tag=N1", []string{"t1"}, 1, 1, 20},
		{"?search=NUMBER%202", []string{"t2"}, 1, 1, 20},
		{"?page=2&pageSize=2", []string{"t2"}, 3, 2, 2},
		{"?page=x&pageSize=y", []string{"t0", "t1", "t2"}, 3, 1, 20},
		{"?pageSize=1000", []string{"t0", "t1", "t2"}, 3, 1, 20},
		{"?page=0&pageSize=0", []string{"t0", "t1", "t2"}, 3, 1, 20},
		{"?tag=none", []string{}, 0, 1, 20},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			resp := e.do(t, http.MethodGet, "/api/v1/templates"+tt.query, "", nil)
			if resp.status != http.StatusOK {
				t.Fatal(resp.status, string(resp.body))
			}
			checkKeys(t, "list", resp.body, "items", "total", "page", "pageSize")
			var l api.TemplateList
			json.Unmarshal(resp.body, &l)
			names := []string{}
			for _, it := range l.Items {
				names = append(names, it.Name)
			}
			if diff := cmp.Diff(tt.names, names); diff != "" || l.Total != tt.total || l.Page != tt.page || l.PageSize != tt.pageSize {
				t.Errorf("names (-want +got):\n%s\ntotal %d page %d size %d", diff, l.Total, l.Page, l.PageSize)
			}
			if !strings.Contains(string(resp.body), `"items":[`) {
				t.Errorf("items is not an array: %s", resp.body)
			}
		})
	}
}

// importPart is one part of an import form.
type importPart struct {
	name, filename, ctype, value string
}

// importBody builds a multipart import form; the Python SDK sends the
// values first and then the file part "file" named templates.yaml of type
// application/x-yaml.
func importBody(tb testing.TB, parts ...importPart) (string, *bytes.Buffer) {
	tb.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name="%s"`, p.name)
		if p.filename != "" {
			cd += fmt.Sprintf(`; filename="%s"`, p.filename)
		}
		h.Set("Content-Disposition", cd)
		if p.ctype != "" {
			h.Set("Content-Type", p.ctype)
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			tb.Fatal(err)
		}
		io.WriteString(w, p.value)
	}
	mw.Close()
	return mw.FormDataContentType(), &buf
}

func yamlFile(doc string) importPart {
	return importPart{"file", "templates.yaml", "application/x-yaml", doc}
}

func tplDoc(name, image string) string {
	return fmt.Sprintf("apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata:\n    name: %s\nspec:\n    image: %s\n", name, image)
}

func TestTemplateImport(t *testing.T) {
	list := "apiVersion: liteboxd/v1\nkind: SandboxTemplateList\nitems:\n" +
		"    - metadata: {name: a}\n      spec: {image: alpine}\n" +
		"    - metadata: {name: b}\n      spec: {image: \"\"}\n"
	tests := []struct {
		name     string
		existing []string
		ctype    string
		body     func(t *testing.T) (string, io.Reader)
		query    string
		want     string
		prepulls []string
		stored   []string
	}{
		{name: "python SDK, default strategy",
			body: func(t *testing.T) (string, io.Reader) {
				return importBody(t, importPart{"strategy", "", "", "create-or-update"}, yamlFile(list))
			},
			want: `{"total":2,"created":1,"updated":0,"skipped":0,"failed":1,"results":[{"name":"a","action":"created","version":1},
				{"name":"b","action":"failed","error":"invalid spec: image is required"}]}`,
			stored: []string{"a"}},
		{name: "python SDK, auto_prepull",
			existing: []string{"a"},
			body: func(t *testing.T) (string, io.Reader) {
				return importBody(t, importPart{"strategy", "", "", "create-or-update"}, importPart{"prepull", "", "", "true"}, yamlFile(list))
			},
			want: `{"total":2,"created":0,"updated":1,"skipped":0,"failed":1,"results":[{"name":"a","action":"updated","version":2},
				{"name":"b","action":"failed","error":"invalid spec: image is required"}],"prepullStarted":["alpine"]}`,
			prepulls: []string{"alpine@a"}, stored: []string{"a"}},
		{name: "file first, create-only",
			existing: []string{"a"},
			body: func(t *testing.T) (string, io.Reader) {
				return importBody(t, yamlFile(tplDoc("a", "alpine")+"---\n"+tplDoc("c", "busybox")), importPart{"strategy", "", "", "create-only"},
					importPart{"prepull", "", "", "1"})
			},
			want: `{"total":2,"created":1,"updated":0,"skipped":1,"failed":0,"results":[
				{"name":"a","action":"skipped","error":"template already exists (strategy=create-only)"},
				{"name":"c","action":"created","version":1}],"prepullStarted":["busybox"]}`,
			prepulls: []string{"busybox@c"}, stored: []string{"a", "c"}},
		{name: "file as a plain value, update-only",
			body: func(t *testing.T) (string, io.Reader) {
				return importBody(t, importPart{"file", "", "", tplDoc("a", "alpine")}, importPart{"strategy", "", "", "update-only"})
			},
			want:   `{"total":1,"created":0,"updated":0,"skipped":1,"failed":0,"results":[{"name":"a","action":"skipped","error":"template not found (strategy=update-only)"}]}`,
			stored: []string{}},
		{name: "strategy and prepull in the query",
			query: "?strategy=create-only&prepull=false",
			body: func(t *testing.T) (string, io.Reader) {
				return importBody(t, yamlFile(tplDoc("a", "alpine")))
			},
			want:   `{"total":1,"created":1,"updated":0,"skipped":0,"failed":0,"results":[{"name":"a","action":"created","version":1}]}`,
			stored: []string{"a"}},
		{name: "strategy twice: the first counts, as LiteBoxd takes it",
			existing: []string{"a"},
			body: func(t *testing.T) (string, io.Reader) {
				return importBody(t, importPart{"strategy", "", "", "create-only"}, importPart{"strategy", "", "", "update-only"},
					yamlFile(tplDoc("a", "alpine")))
			},
			want:   `{"total":1,"created":0,"updated":0,"skipped":1,"failed":0,"results":[{"name":"a","action":"skipped","error":"template already exists (strategy=create-only)"}]}`,
			stored: []string{"a"}},
		{name: "urlencoded form, strategy twice",
			existing: []string{"a"},
			body: func(t *testing.T) (string, io.Reader) {
				v := url.Values{"file": {tplDoc("a", "alpine")}, "strategy": {"create-only", "update-only"}}
				return "application/x-www-form-urlencoded", strings.NewReader(v.Encode())
			},
			want:   `{"total":1,"created":0,"updated":0,"skipped":1,"failed":0,"results":[{"name":"a","action":"skipped","error":"template already exists (strategy=create-only)"}]}`,
			stored: []string{"a"}},
		{name: "urlencoded form",
			body: func(t *testing.T) (string, io.Reader) {
				v := url.Values{"file": {tplDoc("a", "alpine")}, "strategy": {"create-only"}}
				return "application/x-www-form-urlencoded", strings.NewReader(v.Encode())
			},
			want:   `{"total":1,"created":1,"updated":0,"skipped":0,"failed":0,"results":[{"name":"a","action":"created","version":1}]}`,
			stored: []string{"a"}},
		{name: "empty list: results is []",
			body: func(t *testing.T) (string, io.Reader) {
				return importBody(t, yamlFile("apiVersion: liteboxd/v1\nkind: SandboxTemplateList\nitems: []\n"))
			},
			want:   `{"total":0,"created":0,"updated":0,"skipped":0,"failed":0,"results":[]}`,
			stored: []string{}},
		{name: "unknown strategy fails every item",
			body: func(t *testing.T) (string, io.Reader) {
				return importBody(t, importPart{"strategy", "", "", "merge"}, yamlFile(list))
			},
			want: `{"total":2,"created":0,"updated":0,"skipped":0,"failed":2,"results":[{"name":"a","action":"failed","error":"invalid strategy: merge"},
				{"name":"b","action":"failed","error":"invalid strategy: merge"}]}`,
			stored: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTemplateEnv(t)
			for _, name := range tt.existing {
				resp := e.do(t, http.MethodPost, "/api/v1/templates", "application/json",
					strings.NewReader(`{"name":"`+name+`","spec":{"image":"alpine"}}`))
				if resp.status != http.StatusCreated {
					t.Fatal(resp.status, string(resp.body))
				}
			}
			ctype, body := tt.body(t)
			resp := e.do(t, http.MethodPost, "/api/v1/templates/import"+tt.query, ctype, body)
			checkJSON(t, "import", resp, http.StatusOK, tt.want)
			if diff := cmp.Diff(tt.prepulls, e.pp.Calls(), cmpEmpty); diff != "" {
				t.Errorf("prepulls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.stored, e.stored(t), cmpEmpty); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpEmpty equates nil and empty slices.
var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 },
	cmp.Comparer(func(a, b []string) bool { return true }))

func TestTemplateExportAll(t *testing.T) {
	e := newTemplateEnv(t)
	for _, c := range []struct{ name, tag string }{{"a", "x"}, {"b", "y"}, {"c", "x"}} {
		resp := e.do(t, http.MethodPost, "/api/v1/templates", "application/json",
			strings.NewReader(`{"name":"`+c.name+`","tags":["`+c.tag+`"],"spec":{"image":"alpine"}}`))
		if resp.status != http.StatusCreated {
			t.Fatal(resp.status, string(resp.body))
		}
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"a", "b", "c"}},
		{"?tag=x", []string{"a", "c"}},
		{"?names=a,b", []string{"a", "b"}},
		{"?names=a&names=c", []string{"a", "c"}},
		{"?names=a,%20b&names=c", []string{"a", "b", "c"}},
		{"?names=a,b&tag=y", []string{"b"}},
		{"?names=nope", []string{}},
		{"?tag=nope", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			resp := e.do(t, http.MethodGet, "/api/v1/templates/export"+tt.query, "", nil)
			if resp.status != http.StatusOK || resp.header.Get("Content-Type") != "application/x-yaml" {
				t.Fatalf("%d %q %s", resp.status, resp.header.Get("Content-Type"), resp.body)
			}
			var l struct {
				APIVersion string    `yaml:"apiVersion"`
				Kind       string    `yaml:"kind"`
				ExportedAt time.Time `yaml:"exportedAt"`
				Items      []struct {
					Kind     string `yaml:"kind"`
					Metadata struct{ Name string }
				}
			}
			if err := yaml.Unmarshal(resp.body, &l); err != nil {
				t.Fatalf("%v\n%s", err, resp.body)
			}
			names := []string{}
			for _, it := range l.Items {
				names = append(names, it.Metadata.Name)
			}
			if l.APIVersion != "liteboxd/v1" || l.Kind != "SandboxTemplateList" || !l.ExportedAt.Equal(tplNow) {
				t.Errorf("list header %q %q %v", l.APIVersion, l.Kind, l.ExportedAt)
			}
			if diff := cmp.Diff(tt.want, names, cmpEmpty); diff != "" {
				t.Errorf("exported (-want +got):\n%s", diff)
			}
		})
	}
	// The export imports back into an empty server.
	resp := e.do(t, http.MethodGet, "/api/v1/templates/export", "", nil)
	other := newTemplateEnv(t)
	ctype, body := importBody(t, yamlFile(string(resp.body)))
	imp := other.do(t, http.MethodPost, "/api/v1/templates/import", ctype, body)
	if imp.status != http.StatusOK || !strings.Contains(string(imp.body), `"created":3`) {
		t.Errorf("re-import: %d %s", imp.status, imp.body)
	}
	again := other.do(t, http.MethodGet, "/api/v1/templates/export", "", nil)
	if string(again.body) != string(resp.body) {
		t.Errorf("export after re-import differs:\n%s\n---\n%s", resp.body, again.body)
	}
}

// The fixed paths /templates/import and /templates/export win over
// /templates/{name}, and a template may still be called "export".
func TestTemplateRouting(t *testing.T) {
	e := newTemplateEnv(t)
	for _, name := range []string{"export", "import", "versions"} {
		resp := e.do(t, http.MethodPost, "/api/v1/templates", "application/json", strings.NewReader(`{"name":"`+name+`","spec":{"image":"alpine"}}`))
		if resp.status != http.StatusCreated {
			t.Fatal(resp.status, string(resp.body))
		}
	}
	ctype, body := importBody(t, yamlFile(tplDoc("x", "alpine")))
	tests := []struct {
		method, path, ctype string
		body                io.Reader
		status              int
		contains            string // in the body
	}{
		{"GET", "/api/v1/templates/export", "", nil, 200, "kind: SandboxTemplateList"},
		{"POST", "/api/v1/templates/import", ctype, body, 200, `"action":"created"`},
		{"GET", "/api/v1/templates/import", "", nil, 200, `"name":"import"`},
		{"GET", "/api/v1/templates/export/export", "", nil, 200, "kind: SandboxTemplate\n"},
		{"GET", "/api/v1/templates/export/versions", "", nil, 200, `"total":1`},
		{"GET", "/api/v1/templates/versions/versions/1", "", nil, 200, `"version":1`},
		{"PUT", "/api/v1/templates/export", "application/json", strings.NewReader(`{"spec":{"image":"busybox"}}`), 200, `"latestVersion":2`},
		{"PATCH", "/api/v1/templates/export", "", nil, 404, api.CodeNotFound},
		{"POST", "/api/v1/templates/export", "", nil, 404, api.CodeNotFound},
		{"GET", "/api/v1/templates/x/versions/1/more", "", nil, 404, api.CodeNotFound},
		{"DELETE", "/api/v1/templates/export", "", nil, 204, ""},
		{"GET", "/api/v1/templates/export", "", nil, 200, "kind: SandboxTemplateList"},
	}
	for _, tt := range tests {
		resp := e.do(t, tt.method, tt.path, tt.ctype, tt.body)
		if resp.status != tt.status || !strings.Contains(string(resp.body), tt.contains) {
			t.Errorf("%s %s: %d %s; want %d with %q", tt.method, tt.path, resp.status, resp.body, tt.status, tt.contains)
		}
	}
}

// Bad requests get a 4xx with the error body, and store nothing.
func TestTemplateBadInput(t *testing.T) {
	big := `{"name":"big","spec":{"image":"alpine","startupScript":"` + strings.Repeat("x", maxJSONBody) + `"}}`
	tooBigFile := "kind: SandboxTemplate\nmetadata: {name: big}\nspec: {image: alpine}\n# " + strings.Repeat("x", maxTemplateFile)
	multi := func(parts ...importPart) func() (string, io.Reader) {
		return func() (string, io.Reader) { return importBody(t, parts...) }
	}
	raw := func(ctype, body string) func() (string, io.Reader) {
		return func() (string, io.Reader) { return ctype, strings.NewReader(body) }
	}
	tests := []struct {
		name         string
		method, path string
		body         func() (string, io.Reader)
		status       int
		code         string
	}{
		{"create: bad JSON", "POST", "/api/v1/templates", raw("application/json", `{"name":`), 400, api.CodeInvalidRequest},
		{"create: empty body", "POST", "/api/v1/templates", raw("application/json", ``), 400, api.CodeInvalidRequest},
		{"create: not JSON", "POST", "/api/v1/templates", raw("text/plain", `name=x`), 415, api.CodeUnsupportedMediaType},
		{"create: trailing data", "POST", "/api/v1/templates", raw("application/json", `{"name":"a","spec":{"image":"alpine"}} {}`), 400, api.CodeInvalidRequest},
		{"create: wrong type", "POST", "/api/v1/templates", raw("application/json", `{"name":"a","spec":{"image":"alpine","ttl":"1h"}}`), 400, api.CodeInvalidRequest},
		{"create: no name", "POST", "/api/v1/templates", raw("application/json", `{"spec":{"image":"alpine"}}`), 400, api.CodeInvalidRequest},
		{"create: bad name", "POST", "/api/v1/templates", raw("application/json", `{"name":"A!","spec":{"image":"alpine"}}`), 400, api.CodeInvalidRequest},
		{"create: no spec", "POST", "/api/v1/templates", raw("application/json", `{"name":"a"}`), 400, api.CodeInvalidRequest},
		{"create: bad cpu", "POST", "/api/v1/templates", raw("application/json", `{"name":"a","spec":{"image":"alpine","resources":{"cpu":"many"}}}`), 400, api.CodeInvalidRequest},
		{"create: negative ttl", "POST", "/api/v1/templates", raw("application/json", `{"name":"a","spec":{"image":"alpine","ttl":-1}}`), 400, api.CodeInvalidRequest},
		{"create: over 1 MiB", "POST", "/api/v1/templates", raw("application/json", big), 413, api.CodeTooLarge},
		{"update: bad JSON", "PUT", "/api/v1/templates/a", raw("application/json", `[`), 400, api.CodeInvalidRequest},
		{"update: over 1 MiB", "PUT", "/api/v1/templates/a", raw("application/json", big), 413, api.CodeTooLarge},
		{"rollback: bad JSON", "POST", "/api/v1/templates/a/rollback", raw("application/json", `{"targetVersion":"1"}`), 400, api.CodeInvalidRequest},
		{"import: no body", "POST", "/api/v1/templates/import", raw("", ""), 400, api.CodeInvalidRequest},
		{"import: raw YAML", "POST", "/api/v1/templates/import", raw("application/x-yaml", tplDoc("a", "alpine")), 415, api.CodeUnsupportedMediaType},
		{"import: no file part", "POST", "/api/v1/templates/import", multi(importPart{"strategy", "", "", "create-only"}), 400, api.CodeInvalidRequest},
		{"import: two file parts", "POST", "/api/v1/templates/import", multi(yamlFile(tplDoc("a", "alpine")), yamlFile(tplDoc("b", "alpine"))), 400, api.CodeInvalidRequest},
		{"import: bad prepull", "POST", "/api/v1/templates/import", multi(importPart{"prepull", "", "", "maybe"}, yamlFile(tplDoc("a", "alpine"))), 400, api.CodeInvalidRequest},
		{"import: broken multipart", "POST", "/api/v1/templates/import", raw("multipart/form-data; boundary=xyz", "--xyz\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nkind: SandboxTemplate"), 400, api.CodeInvalidRequest},
		{"import: multipart without boundary", "POST", "/api/v1/templates/import", raw("multipart/form-data", "x"), 400, api.CodeInvalidRequest},
		{"import: YAML syntax", "POST", "/api/v1/templates/import", multi(yamlFile("kind: [\n")), 400, api.CodeInvalidYAML},
		{"import: empty file", "POST", "/api/v1/templates/import", multi(yamlFile("")), 400, api.CodeInvalidYAML},
		{"import: not a template", "POST", "/api/v1/templates/import", multi(yamlFile("apiVersion: v1\nkind: Pod\n")), 400, api.CodeInvalidRequest},
		{"import: wrong kind after a good one", "POST", "/api/v1/templates/import", multi(yamlFile(tplDoc("a", "alpine") + "---\nkind: Pod\n")), 400, api.CodeInvalidRequest},
		{"import: wrong apiVersion", "POST", "/api/v1/templates/import", multi(yamlFile("apiVersion: liteboxd/v9\nkind: SandboxTemplate\nmetadata: {name: a}\nspec: {image: alpine}\n")), 400, api.CodeInvalidRequest},
		{"import: file over 10 MiB", "POST", "/api/v1/templates/import", multi(yamlFile(tooBigFile)), 413, api.CodeTooLarge},
		{"import: body over 10 MiB", "POST", "/api/v1/templates/import", multi(importPart{"other", "", "", strings.Repeat("x", maxTemplateFile+maxTemplateSlack)}, yamlFile(tplDoc("a", "alpine"))), 413, api.CodeTooLarge},
		{"import: urlencoded over 10 MiB", "POST", "/api/v1/templates/import", raw("application/x-www-form-urlencoded", "file="+strings.Repeat("x", maxTemplateFile+maxTemplateSlack)), 413, api.CodeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTemplateEnv(t)
			ctype, body := tt.body()
			resp := e.do(t, tt.method, tt.path, ctype, body)
			checkError(t, resp, tt.status, tt.code)
			if got := e.stored(t); len(got) != 0 {
				t.Errorf("stored %v", got)
			}
			if calls := e.pp.Calls(); len(calls) != 0 {
				t.Errorf("prepulls %v", calls)
			}
		})
	}
}

// FuzzImportYAML posts arbitrary files to the import route: it must never
// panic nor answer 5xx, and every answer has the API's shape.
func FuzzImportYAML(f *testing.F) {
	seeds := []string{
		"",
		"---\n",
		tplDoc("a", "alpine"),
		tplDoc("a", "alpine") + "---\n" + tplDoc("b", "busybox:1.36"),
		"apiVersion: liteboxd/v1\nkind: SandboxTemplateList\nitems:\n- metadata: {name: a}\n  spec: {image: alpine, ttl: 5}\n- 3\n- {}\n",
		"kind: SandboxTemplateList\nitems: [~, [], {kind: Pod}, {metadata: {name: x}, spec: []}]\n",
		"kind: SandboxTemplate\nmetadata: {name: a, tags: [x, 1, ~], isPublic: false}\nspec:\n  image: alpine\n  files: [{destination: /a, content: x}]\n" +
			"  readinessProbe: {exec: {command: [\"true\"]}}\n  network: {allowedDomains: [X.org.]}\n  persistence: {enabled: true}\n",
		"kind: SandboxTemplate\nmetadata: {name: a}\nspec: {image: alpine, ttl: 99999999999999999999, startupTimeout: -1}\n",
		"kind: SandboxTemplate\nmetadata: {name: a}\nspec: {image: \"\\0\", env: {\"\": x}}\n",
		"kind: SandboxTemplate\nmetadata: &m {name: a}\nspec: &s {image: alpine}\n---\nkind: SandboxTemplate\nmetadata: *m\nspec: *s\n",
		"a: &a [x, x]\nb: &b [*a, *a]\nkind: SandboxTemplateList\nitems: *b\n",
		"kind: [\n",
		"\t",
		"kind: SandboxTemplate\nmetadata:\n  name: a\n  displayname: A\nspec:\n  image: alpine\n  startupscript: x\n",
		"%YAML 1.1\n---\nkind: !!str SandboxTemplate\nmetadata: {name: !!binary YQ==}\nspec: {image: alpine}\n",
	}
	for _, s := range seeds {
		f.Add(s, "")
		f.Add(s, "create-only")
	}
	f.Add(tplDoc("a", "alpine"), "update-only")
	f.Add(tplDoc("a", "alpine"), "bogus")
	e := newTemplateEnv(f)
	f.Fuzz(func(t *testing.T, doc, strategy string) {
		ctype, body := importBody(t, importPart{"strategy", "", "", strategy}, importPart{"prepull", "", "", "true"}, yamlFile(doc))
		req := httptest.NewRequest(http.MethodPost, "/api/v1/templates/import", body)
		req.Header.Set("Content-Type", ctype)
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		resp := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		switch {
		case resp.status >= 500:
			t.Fatalf("status %d for %q: %s", resp.status, doc, resp.body)
		case resp.status != http.StatusOK:
			if resp.status != http.StatusBadRequest {
				t.Errorf("status %d for %q: %s", resp.status, doc, resp.body)
			}
			checkError(t, resp, resp.status, "")
			return
		}
		var res api.ImportResult
		if err := json.Unmarshal(resp.body, &res); err != nil {
			t.Fatalf("result %s: %v", resp.body, err)
		}
		if res.Results == nil || !strings.Contains(string(resp.body), `"results":[`) {
			t.Errorf("results is not a list: %s", resp.body)
		}
		if len(res.Results) != res.Total || res.Created+res.Updated+res.Skipped+res.Failed != res.Total {
			t.Errorf("counts do not add up: %s", resp.body)
		}
		for _, r := range res.Results {
			valid := r.Action == api.ActionCreated || r.Action == api.ActionUpdated
			if !valid && (r.Error == "" || r.Version != 0) || valid && (r.Error != "" || r.Version < 1) {
				t.Errorf("result item %+v", r)
			}
			if valid {
				if err := template.ValidateName(r.Name); err != nil {
					t.Errorf("stored a template with a bad name %q: %v", r.Name, err)
				}
			}
		}
		if res.Created+res.Updated != len(res.PrepullStarted) {
			t.Errorf("prepullStarted %v for %d created and updated", res.PrepullStarted, res.Created+res.Updated)
		}
	})
}

// GET /templates/{name}/versions lists newest first, as LiteBoxd does, or
// oldest first with order=asc, in pages of limit with next_cursor asking
// for the next; another order or limit, or a cursor the server did not
// give, is 400 naming its parameter.
func TestTemplateVersionsPages(t *testing.T) {
	e := newTemplateEnv(t)
	resp := e.do(t, http.MethodPost, "/api/v1/templates", "application/json", strings.NewReader(`{"name":"web","spec":{"image":"nginx"}}`))
	if resp.status != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.status, resp.body)
	}
	for range 3 {
		resp = e.do(t, http.MethodPut, "/api/v1/templates/web", "application/json", strings.NewReader(`{"spec":{"image":"nginx"}}`))
		if resp.status != http.StatusOK {
			t.Fatalf("update: %d %s", resp.status, resp.body)
		}
	}
	get := func(target string) (int, []byte) {
		resp := e.do(t, http.MethodGet, target, "", nil)
		return resp.status, resp.body
	}
	newest, oldest := []string{"4", "3", "2", "1"}, []string{"1", "2", "3", "4"}
	checkPages(t, "/api/v1/templates/web/versions", []pageCase{
		{"", newest, 1}, {"?order=asc", oldest, 1}, {"?limit=3", newest, 2}, {"?limit=1&order=asc", oldest, 4}, {"?limit=4&order=desc", newest, 1},
	}, get, pageIDs(func(l *api.VersionList) ([]string, string) {
		var ids []string
		for _, v := range l.Items {
			ids = append(ids, strconv.Itoa(v.Version))
		}
		if l.Total != len(l.Items) {
			ids = append(ids, "(total "+strconv.Itoa(l.Total)+")")
		}
		return ids, l.NextCursor
	}))
}
