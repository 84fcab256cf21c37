package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// The codecs read and write server-sent events through the two small
// interfaces below, so that the minimal reader and writer of this file can
// be swapped for the shared api/sse package once it lands, with an adapter
// and no change to any codec.

// SSEEvent is one server-sent event. Its slices are valid until the next
// call to the source's Next.
type SSEEvent struct {
	Name []byte // the event field; empty when the event has none
	Data []byte // the data fields joined with "\n"; empty for comments
	// Raw is the event exactly as read, comments and the blank line that
	// ends it included: the concatenation of every Raw is the stream.
	Raw []byte
}

// SSESource yields server-sent events; io.EOF after the last.
type SSESource interface {
	Next() (SSEEvent, error)
}

// SSESink writes server-sent events. An empty name writes a data-only
// event.
type SSESink interface {
	WriteEvent(name string, data []byte) error
}

// MaxSSEEvent bounds the size of one event an SSEReader accepts.
const MaxSSEEvent = 32 << 20

// ErrSSETooLarge is returned for an event larger than MaxSSEEvent.
var ErrSSETooLarge = errors.New("server-sent event too large")

// SSEReader is a minimal SSE parser over a buffered reader: it reads one
// event per Next as its bytes arrive and keeps no more than one event.
type SSEReader struct {
	r                *bufio.Reader
	name, data, raw  []byte
	hasData, hasName bool
}

// NewSSEReader reads events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	// A small buffer: a proxy holds one per open stream, and a longer
	// line is read in pieces.
	return &SSEReader{r: bufio.NewReaderSize(r, 4<<10)}
}

// Next implements SSESource.
func (s *SSEReader) Next() (SSEEvent, error) {
	s.name, s.data, s.raw = s.name[:0], s.data[:0], s.raw[:0]
	s.hasData, s.hasName = false, false
	lines := 0
	for {
		start := len(s.raw)
		line, err := s.readLine()
		if len(line) == 0 && err != nil {
			if errors.Is(err, io.EOF) && len(s.raw) > 0 {
				return s.event(), nil
			}
			return SSEEvent{}, err
		}
		body := bytes.TrimRight(s.raw[start:], "\r\n")
		if len(body) == 0 {
			if lines > 0 {
				return s.event(), nil
			}
			continue // a stray blank line joins the next event's Raw
		}
		lines++
		s.field(body)
		if err != nil { // a last line without its newline
			return s.event(), nil
		}
	}
}

// readLine appends the next line (newline included) to s.raw.
func (s *SSEReader) readLine() ([]byte, error) {
	start := len(s.raw)
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.raw = append(s.raw, chunk...)
		if len(s.raw) > MaxSSEEvent {
			return nil, ErrSSETooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return s.raw[start:], err
	}
}

func (s *SSEReader) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value, _ := bytes.Cut(line, []byte{':'})
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "event":
		s.name = append(s.name[:0], value...)
		s.hasName = true
	}
}

// Ready reports whether the next event is whole in what was read already,
// so that Next returns it without waiting on the underlying reader: a
// relay writes the events that came together and flushes once, after the
// last of them, and flushes at once an event that came alone.
func (s *SSEReader) Ready() bool {
	b, _ := s.r.Peek(s.r.Buffered())
	lines := 0
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		if len(bytes.TrimRight(b[:i], "\r")) == 0 {
			if lines > 0 {
				return true
			}
		} else {
			lines++
		}
		b = b[i+1:]
	}
}

func (s *SSEReader) event() SSEEvent {
	return SSEEvent{Name: s.name, Data: s.data, Raw: s.raw}
}

// SSEWriter writes events to w, each in one Write call. It does not flush:
// wrap w in something that does when events must leave at once.
type SSEWriter struct {
	w   io.Writer
	buf []byte
}

// NewSSEWriter writes events to w.
func NewSSEWriter(w io.Writer) *SSEWriter { return &SSEWriter{w: w} }

// WriteEvent implements SSESink. Data must not contain newlines (JSON from
// the codecs never does).
func (s *SSEWriter) WriteEvent(name string, data []byte) error {
	b := s.buf[:0]
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	s.buf = b
	_, err := s.w.Write(b)
	return err
}
