package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/google/go-cmp/cmp"
)

func TestWaitForCompletion(t *testing.T) {
	task := func(status string, ready int, reason string) api.PrepullTask {
		return api.PrepullTask{ID: "pp-1", Image: "alpine", Status: status, Progress: api.PrepullProgress{Ready: ready, Total: 3},
			Error: reason, StartedAt: created}
	}
	tests := []struct {
		name    string
		tasks   []api.PrepullTask // answered in turn; the last one repeats
		timeout time.Duration
		want    *api.PrepullTask
		wantErr error
	}{
		{
			name:  "pending, pulling, completed",
			tasks: []api.PrepullTask{task("pending", 0, ""), task("pulling", 1, ""), task("pulling", 2, ""), task("completed", 3, "")},
			want:  new(task("completed", 3, "")),
		},
		{
			name:  "already completed",
			tasks: []api.PrepullTask{task("completed", 3, "")},
			want:  new(task("completed", 3, "")),
		},
		{
			name:    "pulling then failed",
			tasks:   []api.PrepullTask{task("pulling", 1, ""), task("failed", 1, "pull alpine: manifest unknown")},
			want:    new(task("failed", 1, "pull alpine: manifest unknown")),
			wantErr: &client.PrepullFailedError{TaskID: "pp-1", Image: "alpine", Reason: "pull alpine: manifest unknown"},
		},
		{
			name:    "still pulling at the deadline",
			tasks:   []api.PrepullTask{task("pulling", 1, "")},
			timeout: 100 * time.Millisecond,
			wantErr: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/api/v1/images/prepull/pp-1" {
					t.Errorf("request %s %s", r.Method, r.URL.Path)
				}
				i := min(int(calls.Add(1)), len(tt.tasks)) - 1
				json.NewEncoder(w).Encode(tt.tasks[i])
			}))
			defer srv.Close()
			c, err := client.New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			got, err := c.Prepull.WaitForCompletion(ctx, "pp-1", time.Millisecond)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("task (-want +got):\n%s", diff)
			}
			switch want := tt.wantErr.(type) {
			case nil:
				if err != nil {
					t.Fatal(err)
				}
			case *client.PrepullFailedError:
				var failed *client.PrepullFailedError
				if !errors.As(err, &failed) {
					t.Fatalf("err %v, want a PrepullFailedError", err)
				}
				if diff := cmp.Diff(want, failed); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				if msg := "prepull task pp-1 of alpine failed: pull alpine: manifest unknown"; err.Error() != msg {
					t.Errorf("message %q, want %q", err.Error(), msg)
				}
			default:
				if !errors.Is(err, want) {
					t.Errorf("err %v, want %v", err, want)
				}
			}
			if n := calls.Load(); tt.timeout == 0 && int(n) != len(tt.tasks) {
				t.Errorf("%d polls, want %d", n, len(tt.tasks))
			}
		})
	}
}

func TestWaitForCompletionGone(t *testing.T) {
	c, _ := fakeDaemon(t, reply{status: http.StatusNotFound, body: `{"error":"Prepull task 'pp-1' not found","code":"PREPULL_NOT_FOUND"}`})
	if _, err := c.Prepull.WaitForCompletion(t.Context(), "pp-1", 0); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("err %v, want ErrNotFound", err)
	}
}
