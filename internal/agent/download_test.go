package agent

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
)

func TestDownloadFrom(t *testing.T) {
	c, work := startAgent(t)
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(work, "f"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		offset   int64
		want     string
		wantSize int64
	}{
		{name: "whole", offset: 0, want: "0123456789", wantSize: 10},
		{name: "from the middle", offset: 3, want: "3456789", wantSize: 7},
		{name: "at the end", offset: 10, want: "", wantSize: 0},
		{name: "past the end", offset: 15, want: "", wantSize: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, size, err := c.DownloadFrom(ctx, "f", tc.offset)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err != nil || string(b) != tc.want || size != tc.wantSize {
				t.Errorf("got %q, size %d (%v), want %q, size %d", b, size, err, tc.want, tc.wantSize)
			}
		})
	}
	t.Run("a device is skipped to the offset", func(t *testing.T) {
		rc, size, err := c.DownloadFrom(ctx, "/dev/zero", 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b := make([]byte, 4)
		if _, err := io.ReadFull(rc, b); err != nil || string(b) != "\x00\x00\x00\x00" || size != -1 {
			t.Errorf("got %q, size %d (%v)", b, size, err)
		}
	})
	t.Run("a negative offset", func(t *testing.T) {
		resp, err := c.do(ctx, http.MethodGet, "/v1/files", map[string][]string{"path": {"f"}, "offset": {"-1"}}, nil)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("offset -1: %v, want invalid argument", err)
		}
	})
}

// An agent older than ranged downloads sends the whole file: the client
// skips to the offset itself.
func TestDownloadFromOldAgent(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "old.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		_, _ = io.WriteString(w, "0123456789")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c := NewClient(UnixDialer(sock), "")
	t.Cleanup(c.Close)
	rc, size, err := c.DownloadFrom(context.Background(), "f", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || string(b) != "456789" || size != 6 {
		t.Errorf("got %q, size %d (%v), want 456789, size 6", b, size, err)
	}
}
