package main

import (
	"bytes"
	"fmt"
	"net/url"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
)

// benchTerminal measures the keystroke echo round trip through the
// daemon: a `cat` on a tty in sandbox id over the v5.channel.k8s.io
// dialect, one byte written to stdin (stream 0), timed until its echo
// comes back on stdout (stream 1); beside execTrue, the same run's `exec
// true` round trip through REST.
func benchTerminal(d *daemon, id string, n int, execTrue stats) error {
	q := url.Values{"command": {"cat"}, "tty": {"true"}}
	u := "ws://" + d.addr + "/api/v1/sandboxes/" + id + "/exec/interactive?" + q.Encode()
	dialer := websocket.Dialer{Subprotocols: []string{api.TerminalProtocolK8s}, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := dialer.Dial(u, nil)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("terminal: %w (%d)", err, resp.StatusCode)
		}
		return fmt.Errorf("terminal: %w", err)
	}
	defer conn.Close()
	// readEcho waits for b on stdout; the tty may send it in a message of
	// its own or with others (the first keystrokes can meet cat's start).
	readEcho := func(b byte) error {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, p, err := conn.ReadMessage()
			if err != nil {
				return err
			}
			if len(p) > 1 && p[0] == api.TerminalStreamStdout && bytes.IndexByte(p[1:], b) >= 0 {
				return nil
			}
		}
	}
	key := func(b byte) error {
		if err := conn.WriteMessage(websocket.BinaryMessage, []byte{api.TerminalStreamStdin, b}); err != nil {
			return err
		}
		return readEcho(b)
	}
	// Warm up: cat runs and echoes.
	if err := key('w'); err != nil {
		return fmt.Errorf("terminal warm-up: %w", err)
	}
	i := 0
	echo, err := measure(n*4, func() error {
		i++
		return key(byte('a' + i%26))
	})
	if err != nil {
		return fmt.Errorf("terminal echo: %w", err)
	}
	report("keystroke echo round trip (tty)", echo, "exec `true` (REST)", execTrue, "≤ 1.5× exec and ≤ 2 ms p50")
	return nil
}
