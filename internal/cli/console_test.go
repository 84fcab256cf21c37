package cli

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestListenConsole(t *testing.T) {
	// An API on a port whose next one is free, and one whose next one is
	// taken.
	api, next := apiBeforeFreePort(t)
	defer api.Close()
	taken, takenErr := net.Listen("tcp", "127.0.0.1:0")
	if takenErr != nil {
		t.Fatal(takenErr)
	}
	defer taken.Close()
	beforeTaken := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: taken.Addr().(*net.TCPAddr).Port - 1}

	tests := []struct {
		name, addr string
		api        net.Addr
		port       int    // 0: any; -1: no listener
		err        string // a part of the error
	}{
		{"off", "", api.Addr(), -1, ""},
		{"next to the API", consoleAuto, api.Addr(), next, ""},
		{"the next port taken", consoleAuto, beforeTaken, 0, ""},
		{"explicit", "127.0.0.1:0", api.Addr(), 0, ""},
		{"explicit and taken", taken.Addr().String(), api.Addr(), -1, "--console-listen"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := listenConsole(tc.addr, tc.api)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.port == -1 {
				if l != nil {
					l.Close()
					t.Fatalf("listening on %s, want no console", l.Addr())
				}
				return
			}
			defer l.Close()
			a := l.Addr().(*net.TCPAddr)
			if !a.IP.IsLoopback() {
				t.Errorf("console on %s, want loopback", a)
			}
			if tc.port > 0 && a.Port != tc.port {
				t.Errorf("console on port %d, want %d", a.Port, tc.port)
			}
			if a.Port == taken.Addr().(*net.TCPAddr).Port {
				t.Errorf("console on the taken port %d", a.Port)
			}
		})
	}
}

// apiBeforeFreePort listens on a loopback port whose next port is free
// when it returns: other tests' connections take ephemeral ports too.
func apiBeforeFreePort(t *testing.T) (net.Listener, int) {
	t.Helper()
	for range 50 {
		api, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		next := api.Addr().(*net.TCPAddr).Port + 1
		if probe, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(next))); err == nil {
			probe.Close()
			return api, next
		}
		api.Close()
	}
	t.Fatal("no loopback port with a free next port in 50 tries")
	return nil, 0
}
