package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// files/stat describes a file, following symbolic links as a download
// does.
func TestStatFile(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	resp := e.postJSON(t, "/api/v1/sandboxes/"+id+"/exec",
		`{"command":["sh","-c","mkdir -p d && printf hi > f && ln -s d l && ln -s f lf && ln -s nowhere dead"]}`)
	if resp.status != http.StatusOK {
		t.Fatalf("exec: %d %s", resp.status, resp.body)
	}
	tests := []struct {
		path   string
		status int
		isDir  bool
		size   int64
	}{
		{path: "f", status: http.StatusOK, size: 2},
		{path: "d", status: http.StatusOK, isDir: true},
		{path: "l", status: http.StatusOK, isDir: true},
		{path: "lf", status: http.StatusOK, size: 2},
		{path: "dead", status: http.StatusNotFound},
		{path: "missing", status: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp := e.do(t, http.MethodGet, "/api/v1/sandboxes/"+id+"/files/stat?path="+tt.path, "", nil)
			if resp.status != tt.status {
				t.Fatalf("status %d %s, want %d", resp.status, resp.body, tt.status)
			}
			if tt.status != http.StatusOK {
				return
			}
			var fi api.FileInfo
			if err := json.Unmarshal(resp.body, &fi); err != nil {
				t.Fatal(err)
			}
			if fi.IsDir != tt.isDir || !tt.isDir && fi.Size != tt.size {
				t.Errorf("got %+v, want is_dir %v, size %d", fi, tt.isDir, tt.size)
			}
		})
	}
}
