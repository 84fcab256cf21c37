package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

func TestStartProbe(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name, addr, wantErr string
	}{
		{name: "loopback", addr: "127.0.0.1:0"},
		{name: "not loopback", addr: "0.0.0.0:0", wantErr: "not a loopback address"},
		{name: "a name", addr: "localhost:0", wantErr: "not a loopback address"},
		{name: "no port", addr: "127.0.0.1", wantErr: "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr, err := startProbe(ctx, tc.addr, log)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// As bash's exec 3<>/dev/tcp/…: the connection opens, and the
			// agent closes it.
			for i := 0; i < 3; i++ {
				c, err := net.DialTimeout("tcp", addr.String(), time.Second)
				if err != nil {
					t.Fatalf("dial %d: %v", i, err)
				}
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Read(make([]byte, 1)); err != io.EOF {
					t.Errorf("read: %v, want EOF (closed by the agent)", err)
				}
				c.Close()
			}
			cancel()
			deadline := time.Now().Add(2 * time.Second)
			for {
				c, err := net.DialTimeout("tcp", addr.String(), time.Second)
				if err != nil {
					break
				}
				c.Close()
				if time.Now().After(deadline) {
					t.Fatal("the probe still listens after its context ended")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestStartProbeTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := startProbe(context.Background(), l.Addr().String(), slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Fatal("a taken address was not refused")
	}
}
