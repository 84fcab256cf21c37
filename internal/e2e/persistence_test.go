package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

// TestPersistence creates sandboxes from templates with LiteBoxd's
// persistence field on the oci runtime: its size is the disk the sandbox
// sees, Retain keeps the disk after delete where the README says, Delete
// does not, and what the runtime cannot honour is a 400 naming the field.
func TestPersistence(t *testing.T) {
	d := startDaemon(t, "")
	for name, persistence := range map[string]string{
		"keep": `{"enabled": true, "size": "96Mi", "reclaimPolicy": "Retain"}`,
		"drop": `{"enabled": true, "size": "80Mi"}`,
	} {
		if code := d.do("POST", "/api/v1/templates", `{"name": "`+name+`", "spec": {"image": "agent2env/python", "persistence": `+persistence+`}}`, nil); code != http.StatusCreated {
			t.Fatalf("create template %s: %d", name, code)
		}
	}
	ids := map[string]string{}
	for name, size := range map[string]int64{"keep": 96 << 20, "drop": 80 << 20} {
		sb := d.create(api.CreateSandboxRequest{Template: name})
		d.waitRunning(sb.ID)
		ids[name] = sb.ID
		res := d.exec(sb.ID, "sh", "-c", "echo kept > /workspace/file && df -k /workspace | tail -n 1 | awk '{print $2}'")
		kb, err := strconv.ParseInt(strings.TrimSpace(res.Stdout), 10, 64)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("df in %s: %+v", name, res)
		}
		if got := kb << 10; got > size || got < size*9/10 {
			t.Errorf("%s: df says /workspace has %d bytes, want about %d", name, got, size)
		}
		if code := d.do("DELETE", "/api/v1/sandboxes/"+sb.ID, nil, nil); code != http.StatusNoContent {
			t.Fatalf("delete %s: %d", name, code)
		}
	}
	retained, _ := filepath.Glob(filepath.Join(d.dataDir, "oci", "_retained", "*"))
	want := filepath.Join(d.dataDir, "oci", "_retained", ids["keep"]+".img")
	if len(retained) != 1 || retained[0] != want {
		t.Errorf("retained disks %v, want only %s", retained, want)
	}
	if fi, err := os.Stat(want); err != nil || fi.Size() != 96<<20 {
		t.Errorf("the retained disk: %v, %v; want an image of 96Mi", fi, err)
	}

	for name, tc := range map[string]struct{ spec, field string }{
		"classed": {`{"image": "agent2env/python", "persistence": {"enabled": true, "storageClassName": "fast"}}`, "persistence.storageClassName"},
		"gvisor":  {`{"image": "agent2env/python", "runtimeClassName": "gvisor"}`, "runtimeClassName"},
	} {
		if code := d.do("POST", "/api/v1/templates", `{"name": "`+name+`", "spec": `+tc.spec+`}`, nil); code != http.StatusCreated {
			t.Fatalf("create template %s: %d", name, code)
		}
		var e api.Error
		if code := d.do("POST", "/api/v1/sandboxes", `{"template": "`+name+`"}`, &e); code != http.StatusBadRequest || e.Code != api.CodeInvalidRequest || !strings.Contains(e.Message, tc.field) {
			t.Errorf("sandbox from %s: %d %+v, want 400 %s naming %s", name, code, e, api.CodeInvalidRequest, tc.field)
		}
	}
	var e api.Error
	if code := d.do("POST", "/api/v1/templates", `{"name": "tiny", "spec": {"image": "agent2env/python", "persistence": {"enabled": true, "size": "1Mi"}}}`, &e); code != http.StatusBadRequest {
		t.Errorf("template with a 1Mi persistence: %d %+v, want 400", code, e)
	}
	d.assertNoLeaks()
}
