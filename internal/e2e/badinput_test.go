package e2e

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// TestBadInput sends malformed requests to every endpoint: each must be
// answered with a 4xx and the JSON error body, and must create nothing.
func TestBadInput(t *testing.T) {
	d := startDaemon(t, "")
	sb := d.create(api.CreateSandboxRequest{Image: "agent2env/python"})
	id := sb.ID
	huge := `{"image": "` + strings.Repeat("a", 2<<20) + `"}`

	tests := []struct {
		name, method, path, ctype, body string
		status                          int
		code                            string
	}{
		{"create not json", "POST", "/api/v1/sandboxes", "application/json", "not json", 400, api.CodeInvalidRequest},
		{"create empty body", "POST", "/api/v1/sandboxes", "application/json", "", 400, api.CodeInvalidRequest},
		{"create wrong type", "POST", "/api/v1/sandboxes", "application/json", `{"image": 5}`, 400, api.CodeInvalidRequest},
		{"create no image", "POST", "/api/v1/sandboxes", "application/json", `{}`, 400, api.CodeInvalidRequest},
		{"create bad cpu", "POST", "/api/v1/sandboxes", "application/json", `{"image": "agent2env/python", "cpu": "lots"}`, 400, api.CodeInvalidRequest},
		{"create bad memory", "POST", "/api/v1/sandboxes", "application/json", `{"image": "agent2env/python", "memory": "-1Gi"}`, 400, api.CodeInvalidRequest},
		{"create tiny memory", "POST", "/api/v1/sandboxes", "application/json", `{"image": "agent2env/python", "memory": "1Ki"}`, 400, api.CodeInvalidRequest},
		{"create negative ttl", "POST", "/api/v1/sandboxes", "application/json", `{"image": "agent2env/python", "ttl": -5}`, 400, api.CodeInvalidRequest},
		{"create ttl wrong type", "POST", "/api/v1/sandboxes", "application/json", `{"image": "agent2env/python", "ttl": "1h"}`, 400, api.CodeInvalidRequest},
		{"create bad env", "POST", "/api/v1/sandboxes", "application/json", `{"image": "agent2env/python", "env": {"A=B": "c"}}`, 400, api.CodeInvalidRequest},
		{"create env wrong type", "POST", "/api/v1/sandboxes", "application/json", `{"image": "agent2env/python", "env": ["A=B"]}`, 400, api.CodeInvalidRequest},
		{"create trailing data", "POST", "/api/v1/sandboxes", "application/json", `{"image": "agent2env/python"} {}`, 400, api.CodeInvalidRequest},
		{"create wrong content type", "POST", "/api/v1/sandboxes", "text/plain", `{"image": "agent2env/python"}`, 415, api.CodeUnsupportedMediaType},
		{"create no content type", "POST", "/api/v1/sandboxes", "", `{"image": "agent2env/python"}`, 415, api.CodeUnsupportedMediaType},
		{"create huge body", "POST", "/api/v1/sandboxes", "application/json", huge, 413, api.CodeTooLarge},
		{"create bad image ref", "POST", "/api/v1/sandboxes", "application/json", `{"image": "Not A Ref!"}`, 400, api.CodeInvalidRequest},

		{"get unknown", "GET", "/api/v1/sandboxes/nope", "", "", 404, api.CodeSandboxNotFound},
		{"delete unknown", "DELETE", "/api/v1/sandboxes/nope", "", "", 404, api.CodeSandboxNotFound},
		{"logs unknown", "GET", "/api/v1/sandboxes/nope/logs", "", "", 404, api.CodeSandboxNotFound},
		{"exec unknown", "POST", "/api/v1/sandboxes/nope/exec", "application/json", `{"command": ["true"]}`, 404, api.CodeSandboxNotFound},
		{"stream unknown", "POST", "/api/v1/sandboxes/nope/exec/stream", "application/json", `{"command": ["true"]}`, 404, api.CodeSandboxNotFound},
		{"download unknown sandbox", "GET", "/api/v1/sandboxes/nope/files?path=/etc/hostname", "", "", 404, api.CodeSandboxNotFound},

		{"exec command string", "POST", "/api/v1/sandboxes/" + id + "/exec", "application/json", `{"command": "ls"}`, 400, api.CodeInvalidRequest},
		{"exec empty command", "POST", "/api/v1/sandboxes/" + id + "/exec", "application/json", `{"command": []}`, 400, api.CodeInvalidRequest},
		{"exec empty argv0", "POST", "/api/v1/sandboxes/" + id + "/exec", "application/json", `{"command": [""]}`, 400, api.CodeInvalidRequest},
		{"exec timeout type", "POST", "/api/v1/sandboxes/" + id + "/exec", "application/json", `{"command": ["true"], "timeout": "1s"}`, 400, api.CodeInvalidRequest},
		{"exec negative timeout", "POST", "/api/v1/sandboxes/" + id + "/exec", "application/json", `{"command": ["true"], "timeout": -1}`, 400, api.CodeInvalidRequest},
		{"exec huge timeout", "POST", "/api/v1/sandboxes/" + id + "/exec", "application/json", `{"command": ["true"], "timeout": 99999999}`, 400, api.CodeInvalidRequest},
		{"exec cwd traversal", "POST", "/api/v1/sandboxes/" + id + "/exec", "application/json", `{"command": ["true"], "cwd": "../../etc"}`, 400, api.CodeInvalidRequest},
		{"exec NUL arg", "POST", "/api/v1/sandboxes/" + id + "/exec", "application/json", `{"command": ["echo", "a\u0000b"]}`, 400, api.CodeInvalidRequest},

		{"download no path", "GET", "/api/v1/sandboxes/" + id + "/files", "", "", 400, api.CodeInvalidRequest},
		{"download traversal", "GET", "/api/v1/sandboxes/" + id + "/files?path=../../../etc/passwd", "", "", 400, api.CodeInvalidRequest},
		{"download traversal abs", "GET", "/api/v1/sandboxes/" + id + "/files?path=/workspace/../../etc/shadow", "", "", 400, api.CodeInvalidRequest},
		{"download NUL", "GET", "/api/v1/sandboxes/" + id + "/files?path=/etc%00passwd", "", "", 400, api.CodeInvalidRequest},
		{"download missing", "GET", "/api/v1/sandboxes/" + id + "/files?path=/workspace/none", "", "", 404, api.CodeFileNotFound},
		{"download directory", "GET", "/api/v1/sandboxes/" + id + "/files?path=/workspace", "", "", 400, api.CodeInvalidRequest},
		{"upload not multipart", "POST", "/api/v1/sandboxes/" + id + "/files", "application/json", `{}`, 415, api.CodeUnsupportedMediaType},

		{"unknown route", "GET", "/api/v1/nothing", "", "", 404, api.CodeNotFound},
		{"wrong method", "PUT", "/api/v1/sandboxes", "", "", 404, api.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, d.url(tt.path), strings.NewReader(tt.body))
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			expectError(t, req, tt.status, tt.code)
		})
	}

	uploads := []struct {
		name, path string
		withFile   bool
		status     int
	}{
		{"upload traversal", "../escape.txt", true, 400},
		{"upload no path", "", true, 400},
		{"upload no file part", "/workspace/x", false, 400},
		{"upload to read-only root", "/etc/evil", true, 403},
	}
	for _, tt := range uploads {
		t.Run(tt.name, func(t *testing.T) {
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			if tt.path != "" {
				mw.WriteField("path", tt.path)
			}
			if tt.withFile {
				fw, _ := mw.CreateFormFile("file", "f")
				fw.Write([]byte("data"))
			}
			mw.Close()
			resp, err := http.Post(d.url("/api/v1/sandboxes/"+id+"/files"), mw.FormDataContentType(), &body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var e api.Error
			if resp.StatusCode != tt.status || jsonErr(raw, &e) != nil || e.Code == "" {
				t.Errorf("got %d %s; want %d with an error body", resp.StatusCode, raw, tt.status)
			}
		})
	}

	var list api.List[api.Sandbox]
	d.do("GET", "/api/v1/sandboxes", nil, &list)
	if len(list.Items) != 1 || list.Items[0].ID != id {
		t.Errorf("bad requests created sandboxes: %+v", list.Items)
	}
	if res := d.exec(id, "ls", "-A", "/workspace"); res.Stdout != "" {
		t.Errorf("bad uploads left files: %q", res.Stdout)
	}
	d.deleteAll()
	d.assertNoLeaks()
}

// expectError sends req and checks that it is answered with status and
// the error body with code.
func expectError(t *testing.T, req *http.Request, status int, code string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e api.Error
	if resp.StatusCode != status || jsonErr(raw, &e) != nil || e.Code != code || e.Message == "" {
		t.Errorf("got %d %s; want %d with code %s", resp.StatusCode, raw, status, code)
	}
}
