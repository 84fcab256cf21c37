package llm

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestSSEReader(t *testing.T) {
	stream := "\n: comment\nevent: a\ndata: one\ndata: two\n\nid: 7\ndata:no space\r\n\r\n: keepalive\n\nevent: b\ndata: last"
	type ev struct{ Name, Data, Raw string }
	want := []ev{
		{"a", "one\ntwo", "\n: comment\nevent: a\ndata: one\ndata: two\n\n"},
		{"", "no space", "id: 7\ndata:no space\r\n\r\n"},
		{"", "", ": keepalive\n\n"},
		{"b", "last", "event: b\ndata: last"},
	}
	for name, r := range map[string]io.Reader{
		"whole":    bytes.NewReader([]byte(stream)),
		"one byte": iotest.OneByteReader(bytes.NewReader([]byte(stream))),
	} {
		t.Run(name, func(t *testing.T) {
			src := NewSSEReader(r)
			var got []ev
			var raw bytes.Buffer
			for {
				e, err := src.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev{string(e.Name), string(e.Data), string(e.Raw)})
				raw.Write(e.Raw)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if raw.String() != stream {
				t.Errorf("Raw does not add up to the stream:\n%q\n%q", raw.String(), stream)
			}
		})
	}
}

func TestSSEReaderLongLine(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 100<<10)
	src := NewSSEReader(bytes.NewReader(append(append([]byte("data: "), long...), "\n\n"...)))
	e, err := src.Next()
	if err != nil || !bytes.Equal(e.Data, long) {
		t.Fatalf("long event: %d bytes, %v", len(e.Data), err)
	}
}

func TestSSEWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewSSEWriter(&buf)
	_ = w.WriteEvent("ping", []byte(`{"a":1}`))
	_ = w.WriteEvent("", []byte("[DONE]"))
	if got, want := buf.String(), "event: ping\ndata: {\"a\":1}\n\ndata: [DONE]\n\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPumpReportsAnEarlyEnd(t *testing.T) {
	dec := &SliceDecoder{Events: []Event{{Type: EventStart}, {Type: EventBlockStart, Block: Text("")}}}
	var got []EventType
	enc := encoderFunc(func(ev *Event) error { got = append(got, ev.Type); return nil })
	_, err := Pump(dec, enc, nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrorUpstream {
		t.Fatalf("Pump = %v, want an upstream error", err)
	}
	if d := cmp.Diff([]EventType{EventStart, EventBlockStart, EventError}, got); d != "" {
		t.Errorf("events sent to the client (-want +got):\n%s", d)
	}
}

type encoderFunc func(*Event) error

func (f encoderFunc) Encode(ev *Event) error { return f(ev) }

func TestResponseEventsSplitWholeRunes(t *testing.T) {
	text := "a🚀bü🚀"
	for n := 1; n <= 6; n++ {
		var got string
		for _, ev := range ResponseEvents(&Response{Content: []Part{Text(text)}}, n) {
			if ev.Type == EventDelta {
				if !utf8.ValidString(ev.Text) {
					t.Errorf("pieces of %d bytes: %q is not whole runes", n, ev.Text)
				}
				got += ev.Text
			}
		}
		if got != text {
			t.Errorf("pieces of %d bytes add up to %q", n, got)
		}
	}
}

// countingReader counts the reads made of it.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// TestSSEReaderReady: Ready says the next event is whole in what was read
// (Next then reads nothing more), and never when Next would have to wait.
func TestSSEReaderReady(t *testing.T) {
	stream := "\n: comment\nevent: a\ndata: one\n\nid: 7\ndata:x\r\n\r\n: keepalive\n\nevent: b\ndata: last"
	for name, tc := range map[string]struct {
		r     io.Reader
		ready []bool // before each Next
	}{
		"whole":    {bytes.NewReader([]byte(stream)), []bool{false, true, true, false}},
		"one byte": {iotest.OneByteReader(bytes.NewReader([]byte(stream))), []bool{false, false, false, false}},
		"partial":  {bytes.NewReader([]byte("data: 1\n\ndata: 2\n")), []bool{false, false}},
	} {
		t.Run(name, func(t *testing.T) {
			cr := &countingReader{r: tc.r}
			src := NewSSEReader(cr)
			var ready []bool
			for {
				r, before := src.Ready(), cr.reads
				_, err := src.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if r && cr.reads != before {
					t.Errorf("event %d: Ready, yet Next read from the reader", len(ready)+1)
				}
				ready = append(ready, r)
			}
			if d := cmp.Diff(tc.ready, ready); d != "" {
				t.Errorf("Ready before each event (-want +got):\n%s", d)
			}
		})
	}
}
