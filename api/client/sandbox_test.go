package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
	"github.com/google/go-cmp/cmp"
)

// signalWriter closes got the first time it is written to.
type signalWriter struct {
	buf  bytes.Buffer
	got  chan struct{}
	once atomic.Bool
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if !w.once.Swap(true) {
		close(w.got)
	}
	return w.buf.Write(p)
}

// TestExecuteStreamIsLive checks output reaches the writer while the
// command still runs, even when an event arrives in pieces.
func TestExecuteStreamIsLive(t *testing.T) {
	out := &signalWriter{got: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, piece := range []string{"event: std", "out\ndata: {\"type\":\"stdout\",", "\"data\":\"first\"}\n", "\n"} {
			io.WriteString(w, piece)
			rc.Flush()
		}
		select {
		case <-out.got:
		case <-time.After(10 * time.Second):
			t.Error("the client did not write the first chunk before the command ended")
		}
		io.WriteString(w, "event: exit\ndata: {\"type\":\"exit\",\"exit_code\":1,\"timed_out\":true}\n\n")
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := c.Sandbox.ExecuteStream(t.Context(), "sb1", api.ExecRequest{Command: []string{"x"}}, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&api.ExecEvent{Type: "exit", ExitCode: 1, TimedOut: true}, ev); diff != "" {
		t.Errorf("exit event (-want +got):\n%s", diff)
	}
	if got := out.buf.String(); got != "first" {
		t.Errorf("stdout %q, want %q", got, "first")
	}
}

// gatedReader returns first, then blocks until gate is closed before
// returning rest: an upload that buffered the whole body before sending
// would never get past the gate.
type gatedReader struct {
	first, rest []byte
	gate        chan struct{}
	step        int
}

func (r *gatedReader) Read(p []byte) (int, error) {
	switch r.step {
	case 0:
		r.step++
		return copy(p, r.first), nil
	case 1:
		select {
		case <-r.gate:
		case <-time.After(10 * time.Second):
			return 0, errors.New("the server never saw the first chunk: the upload is not streamed")
		}
		r.step++
		return copy(p, r.rest), nil
	}
	return 0, io.EOF
}

// upload is what the fake daemon read from a multipart upload.
type upload struct {
	Fields []string // form names in order
	Path   string
	Mode   string
	Data   []byte
}

func TestUploadFile(t *testing.T) {
	big := make([]byte, 3<<20)
	rand.Read(big)
	tests := []struct {
		name string
		path string
		mode os.FileMode
		body func(gate chan struct{}) io.Reader
		want upload
	}{
		{
			name: "streamed with mode",
			path: "/workspace/run.sh",
			mode: 0o755 | os.ModeSetuid,
			body: func(gate chan struct{}) io.Reader {
				return &gatedReader{first: []byte("#!/bin/sh\n"), rest: []byte("echo hi\n"), gate: gate}
			},
			want: upload{Fields: []string{"path", "mode", "file"}, Path: "/workspace/run.sh", Mode: "0755", Data: []byte("#!/bin/sh\necho hi\n")},
		},
		{
			name: "large without mode",
			path: "/workspace/blob",
			body: func(gate chan struct{}) io.Reader {
				close(gate)
				return bytes.NewReader(big)
			},
			want: upload{Fields: []string{"path", "file"}, Path: "/workspace/blob", Data: big},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate := make(chan struct{})
			var got upload
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/api/v1/sandboxes/sb1/files" {
					t.Errorf("request %s %s", r.Method, r.URL.Path)
				}
				mr, err := r.MultipartReader()
				if err != nil {
					t.Fatalf("not multipart: %v", err)
				}
				for {
					part, err := mr.NextPart()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Errorf("next part: %v", err)
						return
					}
					got.Fields = append(got.Fields, part.FormName())
					switch part.FormName() {
					case "path", "mode":
						b, _ := io.ReadAll(part)
						if part.FormName() == "path" {
							got.Path = string(b)
						} else {
							got.Mode = string(b)
						}
					case "file":
						// Read the first chunk, then let the client send the rest.
						buf := make([]byte, 10)
						n, err := io.ReadFull(part, buf)
						if err != nil {
							t.Errorf("read first chunk: %v", err)
						}
						select {
						case <-gate:
						default:
							close(gate)
						}
						rest, err := io.ReadAll(part)
						if err != nil {
							t.Errorf("read file part: %v", err)
						}
						got.Data = append(buf[:n], rest...)
					}
				}
				json.NewEncoder(w).Encode(api.FileInfo{Name: "x", Path: got.Path, Size: int64(len(got.Data)), Mode: got.Mode})
			}))
			defer srv.Close()
			c, err := client.New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Sandbox.UploadFile(t.Context(), "sb1", tt.path, tt.body(gate), tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			// bytes.Equal, because cmp compares a megabyte slice slowly.
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(bytes.Equal)); diff != "" {
				t.Errorf("upload (-want +got):\n%s", diff)
			}
			if info.Size != int64(len(tt.want.Data)) || info.Path != tt.path {
				t.Errorf("file info %+v", info)
			}
		})
	}
}

func TestUploadRejected(t *testing.T) {
	// The daemon answers before it reads the body; the upload must return
	// the error rather than hang on the unread pipe.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"sandbox sb1 not found","code":"SANDBOX_NOT_FOUND"}`)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Sandbox.UploadFile(t.Context(), "sb1", "/f", bytes.NewReader(make([]byte, 8<<20)), 0)
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("err %v, want ErrNotFound", err)
	}
}

func TestWaitForReady(t *testing.T) {
	tests := []struct {
		name     string
		statuses []api.Sandbox // answered in turn; the last one repeats
		timeout  time.Duration
		want     *api.Sandbox
		wantErr  error
	}{
		{
			name:     "pending then running",
			statuses: []api.Sandbox{{ID: "sb1", Status: api.StatusPending}, {ID: "sb1", Status: api.StatusPending}, {ID: "sb1", Status: api.StatusRunning}},
			want:     &api.Sandbox{ID: "sb1", Status: api.StatusRunning},
		},
		{
			name:     "pending then failed",
			statuses: []api.Sandbox{{ID: "sb1", Status: api.StatusPending}, {ID: "sb1", Status: api.StatusFailed, Reason: "pull alpine: denied"}},
			want:     &api.Sandbox{ID: "sb1", Status: api.StatusFailed, Reason: "pull alpine: denied"},
			wantErr:  &client.SandboxFailedError{ID: "sb1", Status: api.StatusFailed, Reason: "pull alpine: denied"},
		},
		{
			name:     "terminating",
			statuses: []api.Sandbox{{ID: "sb1", Status: api.StatusTerminating, Reason: "ttl expired"}},
			want:     &api.Sandbox{ID: "sb1", Status: api.StatusTerminating, Reason: "ttl expired"},
			wantErr:  &client.SandboxFailedError{ID: "sb1", Status: api.StatusTerminating, Reason: "ttl expired"},
		},
		{
			name:     "paused: only a resume runs it",
			statuses: []api.Sandbox{{ID: "sb1", Status: api.StatusPaused, Reason: "paused by request"}},
			want:     &api.Sandbox{ID: "sb1", Status: api.StatusPaused, Reason: "paused by request"},
			wantErr:  &client.SandboxFailedError{ID: "sb1", Status: api.StatusPaused, Reason: "paused by request"},
		},
		{
			name:     "still pending at the deadline",
			statuses: []api.Sandbox{{ID: "sb1", Status: api.StatusPending}},
			timeout:  100 * time.Millisecond,
			wantErr:  context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := min(int(calls.Add(1)), len(tt.statuses)) - 1
				json.NewEncoder(w).Encode(tt.statuses[i])
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
			sb, err := c.Sandbox.WaitForReady(ctx, "sb1", time.Millisecond)
			if diff := cmp.Diff(tt.want, sb); diff != "" {
				t.Errorf("sandbox (-want +got):\n%s", diff)
			}
			switch want := tt.wantErr.(type) {
			case nil:
				if err != nil {
					t.Fatal(err)
				}
			case *client.SandboxFailedError:
				var got *client.SandboxFailedError
				if !errors.As(err, &got) {
					t.Fatalf("err %v, want a SandboxFailedError", err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
			default:
				if !errors.Is(err, want) {
					t.Errorf("err %v, want %v", err, want)
				}
			}
			if n := calls.Load(); tt.timeout == 0 && int(n) != len(tt.statuses) {
				t.Errorf("%d polls, want %d", n, len(tt.statuses))
			}
		})
	}
}

func TestWaitForReadyGone(t *testing.T) {
	c, _ := fakeDaemon(t, reply{status: http.StatusNotFound, body: `{"error":"sandbox sb1 not found","code":"SANDBOX_NOT_FOUND"}`})
	if _, err := c.Sandbox.WaitForReady(t.Context(), "sb1", 0); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("err %v, want ErrNotFound", err)
	}
}

// TestPauseResume checks the requests of Pause and Resume and their
// answers, errors included.
func TestPauseResume(t *testing.T) {
	var paused atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost || r.ContentLength > 0 {
			t.Errorf("%s %s with %d bytes of body", r.Method, r.URL.Path, r.ContentLength)
		}
		want := map[string]bool{"/api/v1/sandboxes/sb1/pause": false, "/api/v1/sandboxes/sb1/resume": true}
		from, ok := want[r.URL.Path]
		switch {
		case !ok:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"code":"SANDBOX_NOT_FOUND","message":"sandbox not found"}`)
		case paused.Load() != from:
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"code":"CONFLICT","message":"cannot do that now"}`)
		default:
			paused.Store(!from)
			status := map[bool]string{true: "paused", false: "running"}[!from]
			io.WriteString(w, `{"id":"sb1","status":"`+status+`"}`)
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if sb, err := c.Sandbox.Pause(ctx, "sb1"); err != nil || sb.Status != api.StatusPaused {
		t.Fatalf("Pause = %+v, %v", sb, err)
	}
	if _, err := c.Sandbox.Pause(ctx, "sb1"); !errors.Is(err, client.ErrConflict) {
		t.Errorf("second Pause = %v, want ErrConflict", err)
	}
	if sb, err := c.Sandbox.Resume(ctx, "sb1"); err != nil || sb.Status != api.StatusRunning {
		t.Fatalf("Resume = %+v, %v", sb, err)
	}
	if _, err := c.Sandbox.Resume(ctx, "other"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Resume of an unknown sandbox = %v, want ErrNotFound", err)
	}
	if _, err := c.Sandbox.Pause(ctx, ""); err == nil {
		t.Error("Pause without an id: no error")
	}
}
