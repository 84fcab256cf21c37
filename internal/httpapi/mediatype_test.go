package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// A body must come in a media type its operation documents: a browser
// page can send text/plain, a urlencoded or a multipart form to any
// origin without asking, and JSON sent as such must not be taken for a
// request. The refusal (415) comes before anything is created or changed.
func TestUnsupportedMediaType(t *testing.T) {
	e := newOpenAPIEnv(t)
	tpl := `{"name":"py","spec":{"image":"alpine"}}`
	yamlDoc := tplDoc("imported", "alpine")
	send := func(method, target, ctype, body string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		if body == "" {
			req = httptest.NewRequest(method, target, nil)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		req.Header.Set("Authorization", "Bearer "+e.key)
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		return rec
	}
	if rec := send("POST", "/api/v1/templates", "application/json", tpl); rec.Code != http.StatusCreated {
		t.Fatalf("create template: %d %s", rec.Code, rec.Body)
	}
	state := func() string {
		var b bytes.Buffer
		for _, p := range []string{"/api/v1/sandboxes", "/api/v1/templates", "/api/v1/templates/py/versions", "/api/v1/images", "/api/v1/contexts"} {
			b.WriteString(send("GET", p, "", "").Body.String())
		}
		return b.String()
	}
	before := state()
	tests := []struct {
		method, target, ctype, body string
	}{
		{"POST", "/api/v1/sandboxes", "", `{"image":"alpine"}`},
		{"POST", "/api/v1/sandboxes", "text/plain", `{"image":"alpine"}`},
		{"POST", "/api/v1/sandboxes", "application/x-www-form-urlencoded", `{"image":"alpine"}`},
		{"POST", "/api/v1/sandboxes", "multipart/form-data; boundary=x", `{"image":"alpine"}`},
		{"POST", "/api/v1/sandboxes", "application/json-seq", `{"image":"alpine"}`},
		{"POST", "/api/v1/sandboxes", "not a media type", `{"image":"alpine"}`},
		{"POST", "/api/v1/templates", "text/plain", strings.Replace(tpl, "py", "other", 1)},
		{"PUT", "/api/v1/templates/py", "", `{"spec":{"image":"alpine"}}`},
		{"POST", "/api/v1/templates/py/rollback", "text/plain", `{"targetVersion":1}`},
		{"POST", "/api/v1/templates/import", "text/plain", yamlDoc},
		{"POST", "/api/v1/templates/import", "", yamlDoc},
		{"POST", "/api/v1/templates/import", "application/x-yaml", yamlDoc},
		{"POST", "/api/v1/images/import", "text/plain", "archive\nimp/one:1\n"},
		{"POST", "/api/v1/images/import", "", "archive\nimp/one:1\n"},
		{"POST", "/api/v1/images/pull", "text/plain", `{"ref":"busybox"}`},
		{"POST", "/api/v1/images/prepull", "text/plain", `{"image":"busybox"}`},
		{"POST", "/api/v1/sandboxes/nosuchsandbox/files", "application/json", `{"path":"x"}`},
		{"POST", "/api/v1/sandboxes/nosuchsandbox/exec", "text/plain", `{"command":["true"]}`},
		{"POST", "/api/v1/contexts", "text/plain", `{"language":"python"}`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target+" "+tt.ctype, func(t *testing.T) {
			rec := send(tt.method, tt.target, tt.ctype, tt.body)
			checkError(t, response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()},
				http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType)
		})
	}
	if after := state(); after != before {
		t.Errorf("refused requests changed the state:\nbefore %s\nafter  %s", before, after)
	}

	// What the operations document is taken, parameters and case aside;
	// an empty body without a type is the operation's to judge.
	for _, tt := range []struct {
		method, target, ctype, body string
		status                      int
	}{
		{"POST", "/api/v1/templates", "Application/JSON; charset=utf-8", strings.Replace(tpl, "py", "cased", 1), http.StatusCreated},
		{"POST", "/api/v1/images/import", "application/x-tar", "archive\nimp/one:1\n", http.StatusOK},
		{"POST", "/api/v1/images/import", "application/octet-stream", "archive\nimp/two:1\n", http.StatusOK},
		{"POST", "/api/v1/sandboxes", "", "", http.StatusBadRequest},
		{"POST", "/api/v1/sandboxes/nosuchsandbox/stop", "", "", http.StatusNotFound},
		{"POST", "/api/v1/templates/py/prepull", "", "", http.StatusAccepted},
	} {
		if rec := send(tt.method, tt.target, tt.ctype, tt.body); rec.Code != tt.status {
			t.Errorf("%s %s (%q): %d %s, want %d", tt.method, tt.target, tt.ctype, rec.Code, rec.Body, tt.status)
		}
	}
}
