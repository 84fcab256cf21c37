package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// TestPersistenceAPI creates sandboxes from templates with LiteBoxd's
// persistence field and runtimeClassName: the fields round-trip, reach the
// runtime, and what the runtime cannot honour (here, as on the oci
// runtime: storage and runtime classes, more than it can give) is a 400
// naming the field, with nothing made; bad values are refused with the
// template.
func TestPersistenceAPI(t *testing.T) {
	e := newEnv(t, envOptions{templates: true})
	e.rt.SetCapabilities(sandbox.Capabilities{StopKeepsFiles: true, LocalFiles: true, Persistence: true, MaxVolumeBytes: 1 << 30})
	tpl := func(name, spec string) response {
		t.Helper()
		return e.postJSON(t, "/api/v1/templates", `{"name":"`+name+`","spec":`+spec+`}`)
	}

	resp := tpl("keep", `{"image":"alpine","persistence":{"enabled":true,"size":"64Mi","reclaimPolicy":"Retain"}}`)
	if resp.status != http.StatusCreated {
		t.Fatalf("create template: %d %s", resp.status, resp.body)
	}
	var got api.Template
	if err := json.Unmarshal(resp.body, &got); err != nil {
		t.Fatal(err)
	}
	want := &api.PersistenceSpec{Enabled: true, Mode: "rootfs-overlay", Size: "64Mi", ReclaimPolicy: "Retain"}
	if diff := cmp.Diff(want, got.Spec.Persistence); diff != "" {
		t.Errorf("stored persistence (-want +got):\n%s", diff)
	}
	sb := e.createSandbox(t, `{"template":"keep"}`)
	spec, err := e.rt.Spec(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&sandbox.Persistence{SizeBytes: 64 << 20, Retain: true}, spec.Persistence); diff != "" {
		t.Errorf("the runtime's persistence (-want +got):\n%s", diff)
	}

	for _, tc := range []struct{ name, spec, says string }{
		{"classed", `{"image":"alpine","persistence":{"enabled":true,"storageClassName":"fast-ssd"}}`, "persistence.storageClassName"},
		{"gvisor", `{"image":"alpine","runtimeClassName":"gvisor"}`, "runtimeClassName"},
		{"huge", `{"image":"alpine","persistence":{"enabled":true,"size":"2Gi"}}`, "persistence.size"},
	} {
		if resp := tpl(tc.name, tc.spec); resp.status != http.StatusCreated {
			t.Fatalf("create template %s: %d %s", tc.name, resp.status, resp.body)
		}
		resp := e.postJSON(t, "/api/v1/sandboxes", `{"template":"`+tc.name+`"}`)
		checkError(t, resp, http.StatusBadRequest, api.CodeInvalidRequest)
		if !strings.Contains(string(resp.body), tc.says) {
			t.Errorf("sandbox from %s: %s, want the error to name %s", tc.name, resp.body, tc.says)
		}
	}
	if ids := e.ids(t); len(ids) != 1 {
		t.Errorf("sandboxes %v, want only %s: a refused create made one", ids, sb.ID)
	}

	for _, tc := range []struct{ name, spec, says string }{
		{"tiny", `{"image":"alpine","persistence":{"enabled":true,"size":"1Mi"}}`, "16Mi minimum"},
		{"unsized", `{"image":"alpine","persistence":{"enabled":true,"size":"much"}}`, "persistence"},
		{"bad-class", `{"image":"alpine","persistence":{"enabled":true,"storageClassName":"Fast SSD"}}`, "storageClassName"},
		{"bad-policy", `{"image":"alpine","persistence":{"enabled":true,"reclaimPolicy":"Keep"}}`, "reclaimPolicy"},
		{"bad-runtime-class", `{"image":"alpine","runtimeClassName":"gVisor"}`, "runtimeClassName"},
	} {
		resp := tpl(tc.name, tc.spec)
		checkError(t, resp, http.StatusBadRequest, api.CodeInvalidRequest)
		if !strings.Contains(string(resp.body), tc.says) {
			t.Errorf("template %s: %s, want the error to name %s", tc.name, resp.body, tc.says)
		}
	}
}
