package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agent2env/agent2env/api"
)

// termClient is a client of a persistent terminal's attachment in the
// v5.channel.k8s.io dialect that counts offsets as a real one does.
type termClient struct {
	t    *testing.T
	conn *websocket.Conn
	next int64 // the offset after the last stdout byte received
	out  strings.Builder
	// status is the Status that ended the stream, if one did.
	status map[string]any
}

// attach opens persistent terminal name of sandbox id with query q.
func attach(t *testing.T, e *env, id, name, q string) (*termClient, *http.Response, error) {
	t.Helper()
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/api/v1/sandboxes/" + id + "/terminals/" + name + "/attach?" + q
	d := websocket.Dialer{Subprotocols: []string{api.TerminalProtocolK8s}}
	conn, resp, err := d.Dial(u, nil)
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { conn.Close() })
	c := &termClient{t: t, conn: conn}
	if v, err := strconv.ParseInt(strings.TrimPrefix(q, "since="), 10, 64); err == nil {
		c.next = v
	}
	return c, resp, nil
}

// readUntil reads messages until the stdout received holds want or the
// stream ends; it reports whether want came.
func (c *termClient) readUntil(want string) bool {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for !strings.Contains(c.out.String(), want) {
		_, p, err := c.conn.ReadMessage()
		if err != nil {
			return false
		}
		switch p[0] {
		case api.TerminalStreamStdout:
			c.out.Write(p[1:])
			c.next += int64(len(p) - 1)
		case api.TerminalStreamOffset:
			n, err := strconv.ParseInt(string(p[1:]), 10, 64)
			if err != nil {
				c.t.Fatalf("offset message %q", p[1:])
			}
			c.next = n
		case api.TerminalStreamError:
			json.Unmarshal(p[1:], &c.status)
			return strings.Contains(c.out.String(), want)
		}
	}
	return true
}

func (c *termClient) send(s string) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.BinaryMessage, append([]byte{api.TerminalStreamStdin}, s...)); err != nil {
		c.t.Fatal(err)
	}
}

// A persistent terminal outlives its connection: a client that comes
// back with the offset it reached sees what it missed and nothing twice;
// one writer at a time, a takeover ends the other's attachment, a reader
// watches beside; it is listed, in the sandbox's info too, and ends with
// its process or DELETE.
func TestPersistentTerminal(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	base := "/api/v1/sandboxes/" + id + "/terminals"
	// The shell waits for a line, answers it, writes while no one is
	// attached, then echoes its input.
	resp := e.postJSON(t, base, `{"name":"work","command":["sh","-c","read x; echo got-$x; sleep 1; echo while-away; exec cat"]}`)
	if resp.status != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.status, resp.body)
	}

	first, _, err := attach(t, e, id, "work", "since=0")
	if err != nil {
		t.Fatal(err)
	}
	first.send("one\r")
	if !first.readUntil("got-one") {
		t.Fatalf("first attachment: %q", first.out.String())
	}
	first.conn.Close() // a dropped connection
	time.Sleep(1500 * time.Millisecond)

	second, _, err := attach(t, e, id, "work", "since="+strconv.FormatInt(first.next, 10))
	if err != nil {
		t.Fatal(err)
	}
	if !second.readUntil("while-away") {
		t.Fatalf("reattached at %d: %q", first.next, second.out.String())
	}
	if strings.Contains(second.out.String(), "got-one") {
		t.Errorf("reattached at %d, output seen already came again: %q", first.next, second.out.String())
	}

	// One writer: another is refused before the upgrade, a reader is not.
	if _, resp, err := attach(t, e, id, "work", ""); err == nil || resp == nil || resp.StatusCode != http.StatusConflict {
		t.Errorf("a second writer: %v, want 409", err)
	}
	viewer, _, err := attach(t, e, id, "work", "readonly=true")
	if err != nil {
		t.Fatalf("a reader beside the writer: %v", err)
	}
	viewer.send("ignored\r")
	third, _, err := attach(t, e, id, "work", "takeover=true")
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if second.readUntil("\x00never"); second.status["reason"] != api.CodeTerminalTakenOver {
		t.Errorf("the writer taken over ended with %v", second.status)
	}

	var sb api.Sandbox
	if r := e.do(t, "GET", "/api/v1/sandboxes/"+id, "", nil); r.status != http.StatusOK || json.Unmarshal(r.body, &sb) != nil {
		t.Fatalf("get sandbox: %d %s", r.status, r.body)
	}
	if len(sb.Terminals) != 1 || sb.Terminals[0].Name != "work" || !sb.Terminals[0].Running || !sb.Terminals[0].Writer {
		t.Errorf("the sandbox's terminals: %+v", sb.Terminals)
	}

	third.send("typed\r")
	if !third.readUntil("typed\r\ntyped") { // the tty's echo, then cat's
		t.Fatalf("the new writer's input: %q", third.out.String())
	}
	if strings.Contains(viewer.out.String()+third.out.String(), "ignored") {
		t.Errorf("a reader's input was taken")
	}
	third.send("\x04") // cat's end, and the terminal's
	if third.readUntil("\x00never"); third.status["status"] != "Success" {
		t.Errorf("the end of the terminal's process: %v", third.status)
	}
	if viewer.readUntil("\x00never"); viewer.status["status"] != "Success" || !strings.Contains(viewer.out.String(), "typed") {
		t.Errorf("the reader saw %q, then %v", viewer.out.String(), viewer.status)
	}

	var info api.TerminalInfo
	if r := e.do(t, "GET", base+"/work", "", nil); r.status != http.StatusOK || json.Unmarshal(r.body, &info) != nil || info.Running || info.Exit == nil || info.Exit.ExitCode != 0 {
		t.Errorf("an ended terminal: %d %s", r.status, r.body)
	}
	// An ended terminal replays all it kept, then its exit.
	late, _, err := attach(t, e, id, "work", "readonly=true")
	if err != nil || !late.readUntil("while-away") {
		t.Errorf("attaching to an ended terminal: %v, %q", err, late.out.String())
	}
	if r := e.do(t, "DELETE", base+"/work", "", nil); r.status != http.StatusOK {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	var list api.TerminalList
	if r := e.do(t, "GET", base, "", nil); r.status != http.StatusOK || json.Unmarshal(r.body, &list) != nil || len(list.Items) != 0 {
		t.Errorf("after delete: %d %s", r.status, r.body)
	}
}

// Output that overflowed the 1 MiB the agent keeps is skipped on a
// replay, and the client told where it resumes; in the JSON dialect too.
func TestPersistentTerminalOverflow(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.createSandbox(t, `{"image":"alpine"}`).ID
	const total = 3 << 20
	resp := e.postJSON(t, "/api/v1/sandboxes/"+id+"/terminals",
		`{"name":"big","command":["sh","-c","head -c `+strconv.Itoa(total)+` /dev/zero | tr '\\0' x; echo; echo done; sleep 60"]}`)
	if resp.status != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.status, resp.body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var info api.TerminalInfo
		r := e.do(t, "GET", "/api/v1/sandboxes/"+id+"/terminals/big", "", nil)
		if json.Unmarshal(r.body, &info) == nil && info.Output > total {
			if info.OutputStart < info.Output-(1<<20) || info.OutputStart == 0 {
				t.Errorf("kept output from %d to %d", info.OutputStart, info.Output)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the output did not pass %d: %s", total, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c, _, err := attach(t, e, id, "big", "since=0&readonly=true")
	if err != nil {
		t.Fatal(err)
	}
	if !c.readUntil("done") {
		t.Fatalf("replay: %d bytes", c.out.Len())
	}
	if c.next <= total || c.out.Len() > 1<<20 {
		t.Errorf("after the replay the client is at %d having received %d bytes", c.next, c.out.Len())
	}

	u := "ws" + strings.TrimPrefix(e.url, "http") + "/api/v1/sandboxes/" + id + "/terminals/big/attach?readonly=true&since=" + strconv.Itoa(10*total)
	conn, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var f struct {
		Type   string `json:"type"`
		Offset *int64 `json:"offset"`
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	// Past the end: the client is told where the output is at once.
	for {
		_, p, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("no offset frame: %v", err)
		}
		if json.Unmarshal(p, &f) == nil && f.Type == "offset" {
			break
		}
	}
	if f.Offset == nil || *f.Offset != c.next {
		t.Errorf("offset frame %v, want %d", f.Offset, c.next)
	}
}
