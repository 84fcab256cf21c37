// Package restcreate is the sandbox create → ready that make bench times
// through the daemon's REST API, whatever runtime the daemon runs: the oci
// runtime in internal/bench, the kubernetes runtime in kubetest's
// BenchmarkNodeRuntime/rest. Both time the same request to the same ready
// through these functions.
package restcreate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agent2env/agent2env/api"
)

// Ready creates a sandbox of image through the daemon at base
// ("http://host:port") and waits until it is running, and returns its id.
// The request is POST /api/v1/sandboxes with the image alone (the
// daemon's default resources); ready is the status running, which the
// daemon records once the runtime started the sandbox and its agent
// answered. An image the runtime has ready is started within the POST,
// which then answers running; otherwise the sandbox is read every 50 ms
// until it is no longer pending.
func Ready(hc *http.Client, base, image string) (string, error) {
	body, _ := json.Marshal(api.CreateSandboxRequest{Image: image})
	resp, err := hc.Post(base+"/api/v1/sandboxes", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return "", fmt.Errorf("POST /api/v1/sandboxes: %d %s", resp.StatusCode, raw)
	}
	var sb api.Sandbox
	if err := json.Unmarshal(raw, &sb); err != nil {
		return "", err
	}
	for sb.Status == api.StatusPending {
		time.Sleep(50 * time.Millisecond)
		resp, err := hc.Get(base + "/api/v1/sandboxes/" + sb.ID)
		if err != nil {
			return "", err
		}
		err = json.NewDecoder(resp.Body).Decode(&sb)
		resp.Body.Close()
		if err != nil {
			return "", err
		}
	}
	if sb.Status != api.StatusRunning {
		return sb.ID, fmt.Errorf("sandbox %s is %s: %s", sb.ID, sb.Status, sb.Reason)
	}
	return sb.ID, nil
}

// Delete deletes sandbox id through the daemon at base; the daemon answers
// once the runtime has removed it.
func Delete(hc *http.Client, base, id string) error {
	req, _ := http.NewRequest(http.MethodDelete, base+"/api/v1/sandboxes/"+id, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("delete %s: %d", id, resp.StatusCode)
	}
	return nil
}
