package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// TestCapabilities reads GET /api/v1/capabilities, and says what failed
// when the daemon refuses.
func TestCapabilities(t *testing.T) {
	want := api.Capabilities{Runtime: "oci", Pause: true, Snapshots: true}
	refuse := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/capabilities" {
			t.Errorf("request %s %s", r.Method, r.URL.Path)
		}
		if refuse {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(api.Error{Message: "missing or wrong token", Code: api.CodeUnauthorized})
			return
		}
		json.NewEncoder(w).Encode(want)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Capabilities(context.Background()); err != nil || got != want {
		t.Errorf("Capabilities = %+v, %v; want %+v", got, err, want)
	}
	refuse = true
	if _, err := c.Capabilities(context.Background()); err == nil || !strings.Contains(err.Error(), "get capabilities") {
		t.Errorf("Capabilities of a refusing daemon: %v", err)
	}
}
