package daemon

import (
	"net"
	"testing"
)

func TestClientURL(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "http://127.0.0.1:8080"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9000}, "http://127.0.0.1:9000"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9000}, "http://127.0.0.1:9000"},
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 80}, "http://10.1.2.3:80"},
		{&net.TCPAddr{IP: net.ParseIP("fd00::1"), Port: 80}, "http://[fd00::1]:80"},
	} {
		if got := clientURL(tc.addr); got != tc.want {
			t.Errorf("clientURL(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}
