package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A sandbox's JSON gives its status in LiteBoxd's enum, and as it is in
// state, which the Go client reads back; a LiteBoxd server's, without
// state, is read from status.
func TestSandboxJSON(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	sb := func(st SandboxStatus) Sandbox {
		return Sandbox{ID: "sb1", Image: "alpine", CPU: "1", Memory: "1Gi", Status: st, CreatedAt: at, UpdatedAt: at, ExpiresAt: Never}
	}
	const times = `"created_at":"2030-01-02T03:04:05Z","updated_at":"2030-01-02T03:04:05Z","expires_at":"9999-12-31T23:59:59Z"`
	tests := []struct {
		name string
		sb   Sandbox
		json string
	}{
		{"running", sb(StatusRunning), `{"id":"sb1","image":"alpine","cpu":"1","memory":"1Gi","ttl":0,"status":"running",` + times + `,"state":"running"}`},
		{"paused", sb(StatusPaused), `{"id":"sb1","image":"alpine","cpu":"1","memory":"1Gi","ttl":0,"status":"running",` + times + `,"state":"paused"}`},
		{"failed", sb(StatusFailed), `{"id":"sb1","image":"alpine","cpu":"1","memory":"1Gi","ttl":0,"status":"failed",` + times + `,"state":"failed"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.sb)
			if err != nil || string(b) != tt.json {
				t.Fatalf("JSON %s, %v\nwant %s", b, err, tt.json)
			}
			var got Sandbox
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.sb, got); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
		})
	}

	var got Sandbox
	if err := json.Unmarshal([]byte(`{"id":"abc12345","status":"stopped"}`), &got); err != nil || got.Status != "stopped" {
		t.Errorf("a LiteBoxd server's sandbox: %+v, %v; want status stopped", got, err)
	}
}

// A forked sandbox's JSON is a sandbox's, with its contexts, {} when it
// has none.
func TestForkedSandboxJSON(t *testing.T) {
	for _, f := range []ForkedSandbox{
		{Sandbox: Sandbox{ID: "sb2", Status: StatusPaused, ExpiresAt: Never}, Contexts: map[string]string{}},
		{Sandbox: Sandbox{ID: "sb3", Status: StatusRunning, ExpiresAt: Never}, Contexts: map[string]string{"c1": "c2"}},
	} {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]any
		if err := json.Unmarshal(b, &fields); err != nil {
			t.Fatal(err)
		}
		if fields["status"] != string(f.Status.LiteBoxd()) || fields["state"] != string(f.Status) || fields["contexts"] == nil {
			t.Errorf("JSON %s: want status %s, state %s and contexts", b, f.Status.LiteBoxd(), f.Status)
		}
		var got ForkedSandbox
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(f, got); diff != "" {
			t.Errorf("read back (-want +got):\n%s", diff)
		}
	}
}
