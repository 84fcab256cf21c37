package client_test

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/google/go-cmp/cmp"
)

// formPart is one part of a multipart body as the fake daemon read it.
type formPart struct {
	Name, FileName, ContentType, Data string
}

func TestImportTemplates(t *testing.T) {
	const doc = "apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata:\n    name: py\nspec:\n    image: python:3.12\n"
	fileYAML := formPart{Name: "file", FileName: "templates.yaml", ContentType: "application/x-yaml", Data: doc}
	tests := []struct {
		name     string
		strategy string
		prepull  bool
		want     []formPart
	}{
		{
			name: "defaults send the file alone",
			want: []formPart{fileYAML},
		},
		{
			name:     "strategy and prepull",
			strategy: api.StrategyUpdateOnly,
			prepull:  true,
			want: []formPart{
				{Name: "strategy", Data: "update-only"},
				{Name: "prepull", Data: "true"},
				fileYAML,
			},
		},
	}
	const resultJSON = `{"total":2,"created":1,"updated":0,"skipped":0,"failed":1,"results":[` +
		`{"name":"py","action":"created","version":1},{"name":"","action":"failed","error":"template name is required"}],` +
		`"prepullStarted":["python:3.12"]}`
	wantResult := &api.ImportResult{Total: 2, Created: 1, Failed: 1, Results: []api.ImportResultItem{
		{Name: "py", Action: api.ActionCreated, Version: 1},
		{Action: api.ActionFailed, Error: "template name is required"},
	}, PrepullStarted: []string{"python:3.12"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var parts []formPart
			var auth string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/api/v1/templates/import" {
					t.Errorf("request %s %s", r.Method, r.URL.Path)
				}
				auth = r.Header.Get("Authorization")
				if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "multipart/form-data" {
					t.Errorf("content type %q, want multipart/form-data", ct)
				}
				mr, err := r.MultipartReader()
				if err != nil {
					t.Fatalf("multipart reader: %v", err)
				}
				for {
					p, err := mr.NextPart()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("next part: %v", err)
					}
					b, _ := io.ReadAll(p)
					parts = append(parts, formPart{Name: p.FormName(), FileName: p.FileName(),
						ContentType: p.Header.Get("Content-Type"), Data: string(b)})
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, resultJSON)
			}))
			defer srv.Close()
			c, err := client.New(srv.URL, client.WithToken("secret"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.ImportExport.ImportTemplates(t.Context(), strings.NewReader(doc), tt.strategy, tt.prepull)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, parts); diff != "" {
				t.Errorf("form parts (-want +got):\n%s", diff)
			}
			if auth != "Bearer secret" {
				t.Errorf("Authorization %q", auth)
			}
			if diff := cmp.Diff(wantResult, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestImportRejectedEarly(t *testing.T) {
	// The daemon answers before it reads the body; the import must return
	// the error rather than hang on the unread pipe.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, `{"error":"template file is larger than 10 MiB","code":"PAYLOAD_TOO_LARGE"}`)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ImportExport.ImportTemplates(t.Context(), strings.NewReader(strings.Repeat("x", 12<<20)), "", false)
	if !errors.Is(err, client.ErrLimit) {
		t.Errorf("err %v, want ErrLimit", err)
	}
}
