package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// TestSecurityRefusals drives the real daemon as a hostile web page and a
// hostile template author would: each attempt is refused with its status
// and the error body, and nothing is created.
func TestSecurityRefusals(t *testing.T) {
	d := startDaemon(t, "")
	own := "http://" + d.addr
	form := url.Values{"file": {"apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata: {name: planted}\nspec: {image: agent2env/python, startupScript: evil}\n"}}.Encode()
	tests := []struct {
		name, method, path, ctype, body string
		header                          map[string]string
		status                          int
		code                            string
	}{
		{name: "template source on the daemon's API", method: "POST", path: "/api/v1/templates", ctype: "application/json",
			body:   `{"name": "loot", "spec": {"image": "agent2env/python", "files": [{"destination": "/workspace/x", "source": "` + own + `/api/v1/sandboxes"}]}}`,
			status: 400, code: api.CodeInvalidRequest},
		{name: "template source on cloud metadata", method: "POST", path: "/api/v1/templates", ctype: "application/json",
			body:   `{"name": "loot", "spec": {"image": "agent2env/python", "files": [{"destination": "/workspace/x", "source": "http://169.254.169.254/latest/meta-data/"}]}}`,
			status: 400, code: api.CodeInvalidRequest},
		{name: "DNS rebinding", method: "GET", path: "/api/v1/sandboxes", header: map[string]string{"Host": "attacker.example.com:" + strings.Split(d.addr, ":")[1]},
			status: 421, code: api.CodeMisdirected},
		{name: "cross-site form import", method: "POST", path: "/api/v1/templates/import", ctype: "application/x-www-form-urlencoded", body: form,
			header: map[string]string{"Origin": "https://attacker.example.com", "Sec-Fetch-Site": "cross-site"}, status: 403, code: api.CodeForbidden},
		{name: "cross-site text/plain create", method: "POST", path: "/api/v1/sandboxes", ctype: "text/plain", body: `{"image": "agent2env/python"}`,
			header: map[string]string{"Origin": "https://attacker.example.com"}, status: 403, code: api.CodeForbidden},
		{name: "text/plain create", method: "POST", path: "/api/v1/sandboxes", ctype: "text/plain", body: `{"image": "agent2env/python"}`,
			status: 415, code: api.CodeUnsupportedMediaType},
		{name: "image import as a form", method: "POST", path: "/api/v1/images/import", ctype: "application/x-www-form-urlencoded", body: "a=b",
			status: 415, code: api.CodeUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, d.url(tt.path), strings.NewReader(tt.body))
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			for k, v := range tt.header {
				if k == "Host" {
					req.Host = v
				}
				req.Header.Set(k, v)
			}
			expectError(t, req, tt.status, tt.code)
		})
	}
	var sandboxes api.List[api.Sandbox]
	d.do("GET", "/api/v1/sandboxes", nil, &sandboxes)
	var templates api.TemplateList
	d.do("GET", "/api/v1/templates", nil, &templates)
	if len(sandboxes.Items) != 0 || len(templates.Items) != 0 {
		t.Errorf("refused requests created sandboxes %+v, templates %+v", sandboxes.Items, templates.Items)
	}
	d.assertNoLeaks()
}
