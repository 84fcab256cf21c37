package daemon

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store"
)

// TestNamedTaskInputOutsideRefused: a named task whose input passes
// through a symbolic link out of the tasks directory (to the daemon's API
// keys file, say) is answered 400 naming the input, and nothing is made:
// no run record, no sandbox.
func TestNamedTaskInputOutsideRefused(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "api-keys"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	tasks := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(tasks, "etc")); err != nil {
		t.Fatal(err)
	}
	task := "name: steal\nagent: custom\ngoal: g\nentrypoint: 'true'\ninputs: [{source: etc/api-keys, destination: /workspace/k}]\n"
	if err := os.WriteFile(filepath.Join(tasks, "steal.yaml"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir(), fakeruntime.New())
	cfg.TasksDir = tasks
	d := start(t, cfg, nil)

	resp, err := http.Post("http://"+d.addr+"/api/v1/runs", "application/json", strings.NewReader(`{"task_name":"steal"}`))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `inputs[0].source: \"etc/api-keys\"`) || strings.Contains(body, "SECRET") {
		t.Errorf("submit: %d %s, want 400 naming inputs[0].source", resp.StatusCode, body)
	}
	runs, _, err := d.sys.Store.ListRunPage(context.Background(), store.RunFilter{}, store.Page{})
	if err != nil || len(runs) != 0 {
		t.Errorf("runs recorded: %d, %v; want none", len(runs), err)
	}
	if sbs, err := d.sys.Manager.List(context.Background()); err != nil || len(sbs) != 0 {
		t.Errorf("sandboxes: %d, %v; want none", len(sbs), err)
	}
}
