package httpapi

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// utf8Writer never emits a cut character, whichever write cuts it, and
// loses nothing.
func TestUTF8Writer(t *testing.T) {
	text := []byte(strings.Repeat("a─é😀", 50))
	for size := 1; size <= 9; size++ {
		var got bytes.Buffer
		w := &utf8Writer{emit: func(p []byte) error {
			if !utf8.Valid(p) {
				t.Fatalf("writes of %d: emitted %q, a cut character", size, p)
			}
			got.Write(p)
			return nil
		}}
		for i := 0; i < len(text); i += size {
			if n, err := w.Write(text[i:min(i+size, len(text))]); err != nil || n != min(size, len(text)-i) {
				t.Fatalf("write: %d, %v", n, err)
			}
		}
		if err := w.flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), text) {
			t.Errorf("writes of %d: %q", size, got.Bytes())
		}
	}
	// Invalid bytes are passed on, not held back for ever.
	var got []byte
	w := &utf8Writer{emit: func(p []byte) error { got = append(got, p...); return nil }}
	w.Write([]byte{'x', 0xff})
	if !bytes.Equal(got, []byte{'x', 0xff}) {
		t.Errorf("invalid byte: emitted %q", got)
	}
}

// The server pings an idle terminal, and a client that answers keeps it.
func TestTerminalPing(t *testing.T) {
	defer func(p time.Duration) { terminalPingPeriod = p }(terminalPingPeriod)
	terminalPingPeriod = 50 * time.Millisecond
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/api/v1/sandboxes/" + id + "/exec/interactive?command=sleep&command=1&tty=false"
	conn, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("dial: %v (%d %s)", err, resp.StatusCode, b)
	}
	defer conn.Close()
	pings := 0
	conn.SetPingHandler(func(data string) error {
		pings++
		return conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	var exit struct {
		Type     string `json:"type"`
		ExitCode *int   `json:"exitCode"`
	}
	if err := conn.ReadJSON(&exit); err != nil || exit.Type != "exit" || exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("after a second of sleep: %+v, %v", exit, err)
	}
	if pings < 5 {
		t.Errorf("%d pings in a second at a period of 50 ms", pings)
	}
	if _, _, err := conn.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after the exit: %v, want a close 1000", err)
	}
}
