package sse_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agent2env/agent2env/api/sse"
	"github.com/google/go-cmp/cmp"
)

func TestWriter(t *testing.T) {
	tests := []struct {
		name string
		send func(w *sse.Writer) error
		want string
	}{
		{
			name: "json, as the daemon has always sent it",
			send: func(w *sse.Writer) error {
				return w.SendJSON("stdout", map[string]string{"data": "a\nb <&>"})
			},
			want: "event: stdout\ndata: {\"data\":\"a\\nb \\u003c\\u0026\\u003e\"}\n\n",
		},
		{
			name: "multi-line data, every line end",
			send: func(w *sse.Writer) error { return w.Send(sse.Event{Data: []byte("a\nb\r\nc\rd")}) },
			want: "data: a\ndata: b\ndata: c\ndata: d\n\n",
		},
		{
			name: "trailing line break and empty data",
			send: func(w *sse.Writer) error {
				if err := w.Send(sse.Event{Name: "x", Data: []byte("a\n")}); err != nil {
					return err
				}
				return w.Send(sse.Event{Name: "y"})
			},
			want: "event: x\ndata: a\ndata: \n\nevent: y\ndata: \n\n",
		},
		{
			name: "id",
			send: func(w *sse.Writer) error { return w.Send(sse.Event{ID: "7", Name: "n", Data: []byte("d")}) },
			want: "event: n\nid: 7\ndata: d\n\n",
		},
		{
			name: "comment",
			send: func(w *sse.Writer) error { return w.Comment("keep-alive\nsecond") },
			want: ": keep-alive\n: second\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.send(sse.NewWriter(&b)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("stream (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriterRejectsBrokenFields(t *testing.T) {
	w := sse.NewWriter(io.Discard)
	for _, ev := range []sse.Event{{Name: "a\nb"}, {Name: "a\rb"}, {ID: "1\n"}, {ID: "1\x002"}} {
		if err := w.Send(ev); err == nil {
			t.Errorf("Send(%q) = nil, want an error", ev)
		}
	}
	if err := w.SendJSON("a\nb", 1); err == nil {
		t.Error("SendJSON with a line break in the name = nil, want an error")
	}
	if err := w.SendJSON("a", func() {}); err == nil {
		t.Error("SendJSON of a func = nil, want an error")
	}
}

func TestWriterFlushes(t *testing.T) {
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	if err := sse.NewWriter(bw).Send(sse.Event{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if b.String() != "data: x\n\n" {
		t.Errorf("after Send the underlying writer holds %q: not flushed", b.String())
	}

	rec := httptest.NewRecorder()
	w := sse.Start(rec)
	if err := w.SendJSON("e", 1); err != nil {
		t.Fatal(err)
	}
	if !rec.Flushed {
		t.Error("the response was not flushed")
	}
	want := http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}, "X-Accel-Buffering": {"no"}}
	if diff := cmp.Diff(want, rec.Header()); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if rec.Code != http.StatusOK || rec.Body.String() != "event: e\ndata: 1\n\n" {
		t.Errorf("response %d %q", rec.Code, rec.Body)
	}
}

// equateBytes takes nil and empty data as equal.
var equateBytes = cmp.Comparer(bytes.Equal)

func ev(id, name, data string) sse.Event { return sse.Event{ID: id, Name: name, Data: []byte(data)} }

var readerTests = []struct {
	name   string
	stream string
	want   []sse.Event
}{
	{"one event", "event: exit\ndata: {}\n\n", []sse.Event{ev("", "exit", "{}")}},
	{"multi-line data joined with newlines", "event: stdout\ndata: line1\ndata:line2\ndata: \n\n",
		[]sse.Event{ev("", "stdout", "line1\nline2\n")}},
	{"default name, comments, unknown fields", ": hello\nid: 7\nretry: 100\nfoo: bar\ndata: x\n\n",
		[]sse.Event{ev("7", "message", "x")}},
	{"CRLF lines", "event: a\r\ndata: 1\r\n\r\nevent: b\r\ndata: 2\r\n\r\n",
		[]sse.Event{ev("", "a", "1"), ev("", "b", "2")}},
	{"CR lines", "event: a\rdata: 1\r\revent: b\rdata: 2\r\r", []sse.Event{ev("", "a", "1"), ev("", "b", "2")}},
	{"mixed line ends", "data: 1\r\n\ndata: 2\r\rdata: 3\n\r\n", []sse.Event{ev("", "message", "1"), ev("", "message", "2"), ev("", "message", "3")}},
	{"an event without data is dropped, and its name", "event: ping\n\ndata: 1\n\n", []sse.Event{ev("", "message", "1")}},
	{"a data field without a colon is an empty line of data", "data\n\ndata\ndata\n\n",
		[]sse.Event{ev("", "message", ""), ev("", "message", "\n")}},
	{"only one space is stripped", "data:  x \n\n", []sse.Event{ev("", "message", " x ")}},
	{"colon in the value", "data: {\"a\":\"b: c\"}\n\n", []sse.Event{ev("", "message", `{"a":"b: c"}`)}},
	{"the id persists, an empty id resets it, one with NUL is ignored",
		"id: 1\ndata: a\n\ndata: b\n\nid: 2\x003\ndata: c\n\nid\ndata: d\n\n",
		[]sse.Event{ev("1", "message", "a"), ev("1", "message", "b"), ev("1", "message", "c"), ev("", "message", "d")}},
	{"a leading byte order mark is skipped", "\xEF\xBB\xBFdata: x\n\n", []sse.Event{ev("", "message", "x")}},
	{"a second byte order mark is not", "\xEF\xBB\xBFdata: x\n\n\xEF\xBB\xBFdata: y\n\n", []sse.Event{ev("", "message", "x")}},
	{"field names are case-sensitive", "Data: x\nEVENT: y\ndata: z\n\n", []sse.Event{ev("", "message", "z")}},
	{"a cut-off event is dropped", "event: a\ndata: 1\n\nevent: b\ndata: 2\n", []sse.Event{ev("", "a", "1")}},
	{"a last line without an end is dropped", "data: 1\n\ndata: 2\n\n:", []sse.Event{ev("", "message", "1"), ev("", "message", "2")}},
	{"empty stream", "", nil},
	{"long line", "data: " + strings.Repeat("x", 10000) + "\n\n", []sse.Event{ev("", "message", strings.Repeat("x", 10000))}},
}

// readers split a stream differently, so that line ends fall across reads.
var readers = map[string]func(string) io.Reader{
	"whole":    func(s string) io.Reader { return strings.NewReader(s) },
	"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
	"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
}

// readAll reads every event of r, copying their data.
func readAll(r *sse.Reader) ([]sse.Event, error) {
	var out []sse.Event
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		e.Data = bytes.Clone(e.Data)
		out = append(out, e)
	}
}

func TestReader(t *testing.T) {
	for _, tt := range readerTests {
		for rname, newReader := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				got, err := readAll(sse.NewReader(newReader(tt.stream)))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got, equateBytes); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestReaderBounds(t *testing.T) {
	half := strings.Repeat("x", sse.MaxEventSize/2)
	tests := map[string]string{
		"event":     "data: " + half + "\ndata: " + half + "\ndata: " + half + "\n\n",
		"line":      "data: " + half + half + "\n\n",
		"cr line":   ":" + half + half + "\r",
		"no end":    "data: " + half + half,
		"just over": "data: " + half + "\ndata: " + half + "\n\n",
	}
	for name, stream := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := sse.NewReader(strings.NewReader(stream)).Next(); !errors.Is(err, sse.ErrTooLarge) {
				t.Errorf("Next on an oversized event: %v, want ErrTooLarge", err)
			}
		})
	}
	just := "data: " + half + "\ndata: " + half[1:] + "\n\n"
	if e, err := sse.NewReader(strings.NewReader(just)).Next(); err != nil || len(e.Data) != sse.MaxEventSize {
		t.Errorf("Next on an event of the maximum size: %d bytes, %v", len(e.Data), err)
	}
	// Keep-alives of a long stream are not one event that grows.
	stream := strings.Repeat(": keep-alive\n\n", sse.MaxEventSize/10) + "data: x\n\n"
	if got, err := readAll(sse.NewReader(strings.NewReader(stream))); err != nil || len(got) != 1 {
		t.Errorf("after many keep-alives: %v, %v; want one event", got, err)
	}
}

func TestReaderErrors(t *testing.T) {
	boom := errors.New("boom")
	r := sse.NewReader(io.MultiReader(strings.NewReader("data: 1\n\ndata: 2\n"), iotest.ErrReader(boom)))
	if e, err := r.Next(); err != nil || string(e.Data) != "1" {
		t.Fatalf("Next = %q, %v", e.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Errorf("Next = %v, want the reader's error", err)
	}
}

func TestRoundTrip(t *testing.T) {
	sent := []sse.Event{
		ev("", "stdout", "plain"),
		ev("1", "stdout", "two\nlines"),
		ev("2", "x", ""),
		ev("3", "message", "\n\nends\n"),
		ev("4", "y", " leading space"),
		ev("5", "z", ": looks like a comment"),
	}
	var b bytes.Buffer
	w := sse.NewWriter(&b)
	for i, e := range sent {
		if err := w.Send(e); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			w.Comment("ping")
		}
	}
	got, err := readAll(sse.NewReader(&b))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sent, got, equateBytes); diff != "" {
		t.Errorf("events (-sent +read):\n%s", diff)
	}
}

// parse is the standard's algorithm, written plainly: the oracle the
// fuzzer holds Reader to.
func parse(stream string) []sse.Event {
	stream = strings.TrimPrefix(stream, "\xEF\xBB\xBF")
	var out []sse.Event
	var data, name, id string
	hasData := false
	for {
		i := strings.IndexAny(stream, "\r\n")
		if i < 0 {
			return out // a line without an end, or nothing, is dropped
		}
		line := stream[:i]
		if strings.HasPrefix(stream[i:], "\r\n") {
			i++
		}
		stream = stream[i+1:]
		switch {
		case line == "":
			if hasData {
				n := name
				if n == "" {
					n = "message"
				}
				out = append(out, ev(id, n, data))
			}
			data, name, hasData = "", "", false
			continue
		case line[0] == ':':
			continue
		}
		field, value, ok := strings.Cut(line, ":")
		if ok {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			name = value
		case "data":
			if hasData {
				data += "\n"
			}
			data += value
			hasData = true
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		}
	}
}

func FuzzReader(f *testing.F) {
	for _, tt := range readerTests {
		if len(tt.stream) < 1000 {
			f.Add(tt.stream)
		}
	}
	f.Fuzz(func(t *testing.T, stream string) {
		want := parse(stream)
		for rname, newReader := range readers {
			got, err := readAll(sse.NewReader(newReader(stream)))
			if err != nil {
				t.Fatalf("%s: %v", rname, err)
			}
			if diff := cmp.Diff(want, got, equateBytes); diff != "" {
				t.Fatalf("%s: events of %q (-standard +Reader):\n%s", rname, stream, diff)
			}
		}
		// What a Reader read, a Writer writes so that it reads the same.
		var b bytes.Buffer
		w := sse.NewWriter(&b)
		for _, e := range want {
			if err := w.Send(e); err != nil {
				t.Fatalf("Send(%q): %v", e, err)
			}
		}
		// A Writer leaves an empty id unsent, so the last id set stays.
		lastID := ""
		for i := range want {
			if want[i].ID == "" {
				want[i].ID = lastID
			}
			lastID = want[i].ID
		}
		got, err := readAll(sse.NewReader(&b))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, equateBytes); diff != "" {
			t.Fatalf("round trip of %q (-read +written and read again):\n%s", b.String(), diff)
		}
	})
}

func BenchmarkWriter(b *testing.B) {
	w := sse.NewWriter(io.Discard)
	v := struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}{"stdout", "some output of a command\n"}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.SendJSON("stdout", v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReader(b *testing.B) {
	const event = "event: stdout\ndata: {\"type\":\"stdout\",\"data\":\"some output of a command\\n\"}\n\n"
	stream := strings.Repeat(event, 1000)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		r := sse.NewReader(strings.NewReader(stream))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}
