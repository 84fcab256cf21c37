package cli

import (
	"fmt"
	"net"
	"strconv"
)

// consoleAuto is --console-listen's default: a loopback port next to the
// API's.
const consoleAuto = "auto"

// listenConsole listens for the web console at addr (serve
// --console-listen): nil for "", and for consoleAuto loopback at the
// port after api's, or any free loopback port when that one is taken (the
// daemon logs the console's address at start). An address given
// explicitly that cannot be listened on is an error.
func listenConsole(addr string, api net.Addr) (net.Listener, error) {
	switch addr {
	case "":
		return nil, nil
	case consoleAuto:
		port := 0
		if a, ok := api.(*net.TCPAddr); ok && a.Port > 0 && a.Port < 65535 {
			port = a.Port + 1
		}
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return l, nil
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listen for the console on loopback: %w", err)
		}
		return l, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the console on %s (--console-listen; empty for no console): %w", addr, err)
	}
	return l, nil
}
