package cli

import (
	"net"
	"testing"
)

func TestBoundListen(t *testing.T) {
	took := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}
	tests := []struct {
		listen string
		addr   net.Addr
		want   string
	}{
		{"127.0.0.1:0", took, "127.0.0.1:41234"},
		{"localhost:0", took, "localhost:41234"}, // the name is kept
		{":0", &net.TCPAddr{IP: net.IPv6unspecified, Port: 41234}, ":41234"},
		{"127.0.0.1:8080", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "127.0.0.1:8080"},
		{"[::1]:0", &net.TCPAddr{IP: net.IPv6loopback, Port: 41234}, "[::1]:41234"},
		{"127.0.0.1:0", &net.UnixAddr{Name: "/run/a2e.sock", Net: "unix"}, "127.0.0.1:0"},
	}
	for _, tt := range tests {
		if got := boundListen(tt.listen, tt.addr); got != tt.want {
			t.Errorf("boundListen(%q, %v) = %q, want %q", tt.listen, tt.addr, got, tt.want)
		}
	}
}
