package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

func TestNetcheckConnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	open := l.Addr().String()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	t.Cleanup(func() { l.Close() })
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
	}{
		{"reached", []string{"netcheck", "connect", open, "1"}, 0, "connected\n"},
		{"refused", []string{"netcheck", "connect", refused, "1"}, 1, "refused"},
		{"last attempt decides", []string{"netcheck", "connect", open, "2"}, 0, "connected\nconnected\n"},
		{"no attempts", []string{"netcheck", "connect", open, "0"}, 2, ""},
		{"no address", []string{"netcheck", "connect"}, 2, ""},
		{"unknown", []string{"netcheck", "ping", open}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("run %q = %d, stdout %q, stderr %q; want %d, stdout with %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout)
			}
		})
	}
}

func TestNetcheckListen(t *testing.T) {
	var stderr bytes.Buffer
	// A port taken: listen fails at once.
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	if code := run(context.Background(), []string{"netcheck", "listen", port}, &bytes.Buffer{}, &stderr); code != 1 {
		t.Errorf("listen on a taken port: exit %d, stderr %q; want 1", code, stderr.String())
	}
}
