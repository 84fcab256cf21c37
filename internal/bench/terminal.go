package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
)

// benchTerminal measures the keystroke echo round trip through the
// daemon: a `cat` on a tty in sandbox id over the v5.channel.k8s.io
// dialect, one byte written to stdin (stream 0), timed until its echo
// comes back on stdout (stream 1); beside execTrue, the same run's `exec
// true` round trip through REST.
func benchTerminal(d *daemon, id string, n int, execTrue stats) error {
	conn, err := dialTerminal(d, id, "cat")
	if err != nil {
		return err
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

// dialTerminal opens a terminal WebSocket (v5.channel.k8s.io) to argv
// on a tty in sandbox id.
func dialTerminal(d *daemon, id string, argv ...string) (*websocket.Conn, error) {
	q := url.Values{"command": argv, "tty": {"true"}}
	u := "ws://" + d.addr + "/api/v1/sandboxes/" + id + "/exec/interactive?" + q.Encode()
	dialer := websocket.Dialer{Subprotocols: []string{api.TerminalProtocolK8s}, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := dialer.Dial(u, nil)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("terminal: %w (%d)", err, resp.StatusCode)
		}
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return conn, nil
}

// terminalCatSize is the size of the file benchTerminalThroughput cats.
const terminalCatSize = 100_000_000

// terminalCatLine is the line the file benchTerminalThroughput cats is
// made of.
const terminalCatLine = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvw"

// benchTerminalThroughput measures the terminal's output throughput: a
// `cat` of a 100 MB file of text lines on a tty in sandbox id, read as
// fast as the client can over v5.channel.k8s.io until the exit status,
// the file's size over the time from the dial to the status; against the
// same cat on a bare pty of the host read directly, in the same run (what
// the pty itself allows the machine now); beside them the daemon's RSS
// before, at its peak during (sampled every 20 ms) and after, which a
// terminal that buffers nothing keeps flat.
func benchTerminalThroughput(d *daemon, id string) error {
	bare, err := barePtyThroughput()
	if err != nil {
		return fmt.Errorf("bare pty: %w", err)
	}
	const file = "/tmp/bench-terminal-cat"
	var res api.ExecResponse
	mk := fmt.Sprintf("yes %s | head -c %d > %s", terminalCatLine, terminalCatSize, file)
	if err := d.post("/api/v1/sandboxes/"+id+"/exec", api.ExecRequest{Command: []string{"sh", "-c", mk}, Timeout: 120}, &res); err != nil || res.ExitCode != 0 {
		return fmt.Errorf("make the file to cat: %v (exit %d: %s)", err, res.ExitCode, res.Stderr)
	}
	defer d.post("/api/v1/sandboxes/"+id+"/exec", api.ExecRequest{Command: []string{"rm", "-f", file}}, &res)
	pid := d.cmd.Process.Pid
	before, err := rss(pid)
	if err != nil {
		return err
	}
	var peak atomic.Int64
	peak.Store(before)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if r, err := rss(pid); err == nil && r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()
	start := time.Now()
	received, err := catThroughTerminal(d, id, file)
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	if err != nil {
		return fmt.Errorf("terminal throughput: %w", err)
	}
	after, err := rss(pid)
	if err != nil {
		return err
	}
	ours := float64(terminalCatSize) / 1e6 / elapsed.Seconds()
	fmt.Printf("%-34s %.0f MB/s (%d bytes through the tty in %s) | bare pty on the host %.0f MB/s | ratio %.2fx | daemon RSS %d MiB before, %d MiB peak, %d MiB after | target ≥ 50 MB/s, RSS flat\n",
		"terminal output (cat 100 MB, tty)", ours, received, elapsed.Round(time.Millisecond), bare, ours/bare,
		before>>20, peak.Load()>>20, after>>20)
	return nil
}

// barePtyThroughput is the baseline of benchTerminalThroughput: the same
// cat of the same file on a pty of the host, its master read directly,
// in MB/s.
func barePtyThroughput() (float64, error) {
	f, err := os.CreateTemp("", "a2e-bench-cat-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	line := []byte(terminalCatLine + "\n")
	w := bufio.NewWriterSize(f, 1<<20)
	for n := 0; n < terminalCatSize; n += len(line) {
		w.Write(line[:min(len(line), terminalCatSize-n)])
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return 0, err
	}
	start := time.Now()
	cmd := exec.Command("cat", f.Name())
	tty, err := pty.Start(cmd)
	if err != nil {
		return 0, err
	}
	defer tty.Close()
	buf := make([]byte, 32<<10)
	for {
		if _, err := tty.Read(buf); err != nil {
			break // EIO: the end of the output
		}
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("cat: %w", err)
	}
	return float64(terminalCatSize) / 1e6 / time.Since(start).Seconds(), nil
}

// catThroughTerminal cats file on a tty in sandbox id and returns how many
// stdout bytes came before a Success status.
func catThroughTerminal(d *daemon, id, file string) (int64, error) {
	conn, err := dialTerminal(d, id, "cat", file)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var received int64
	for {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, r, err := conn.NextReader()
		if err != nil {
			return received, err
		}
		var stream [1]byte
		if _, err := r.Read(stream[:]); err != nil {
			return received, err
		}
		switch stream[0] {
		case api.TerminalStreamStdout:
			n, err := io.Copy(io.Discard, r)
			received += n
			if err != nil {
				return received, err
			}
		case api.TerminalStreamError:
			var st struct{ Status, Message string }
			if err := json.NewDecoder(r).Decode(&st); err != nil {
				return received, err
			}
			if st.Status != "Success" {
				return received, fmt.Errorf("cat: %s", st.Message)
			}
			return received, nil
		}
	}
}
