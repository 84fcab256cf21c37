// Package sse writes and reads Server-Sent Events, the text/event-stream
// format of the HTML living standard, for the daemon's streams (exec
// output, code executions, image progress) and the Go client that reads
// them.
//
// A Writer sends each event with one write and a flush; a Reader parses a
// stream by the standard's rules (LF, CRLF or CR line ends, comments,
// multi-line data, the last event id kept across events, retry ignored).
// Both reuse their buffers, so that streaming costs no allocation per
// event beyond what the caller's values need.
package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Event is one Server-Sent Event.
type Event struct {
	// ID is the event's id. A Writer sends it when it is not empty; a
	// Reader gives the last id the stream set, which the standard keeps
	// for the events that follow.
	ID string
	// Name is the event type. A Writer sends it when it is not empty; a
	// Reader gives "message" for an event that names none.
	Name string
	// Data is the payload. Line breaks in it arrive as "\n" (a CR or
	// CRLF cannot be told apart from LF on the wire). From a Reader, Data
	// is valid until the next call to Next.
	Data []byte
}

// Writer writes events to an io.Writer, flushing after each when the
// writer can flush (an http.ResponseWriter, a *bufio.Writer). It is safe
// for concurrent use; each event is written whole.
type Writer struct {
	mu    sync.Mutex
	w     io.Writer
	flush func() error
	buf   []byte
	js    bytes.Buffer
	enc   *json.Encoder
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer {
	sw := &Writer{w: w}
	switch f := w.(type) {
	case http.ResponseWriter:
		sw.flush = http.NewResponseController(f).Flush
	case interface{ Flush() error }:
		sw.flush = f.Flush
	case http.Flusher:
		sw.flush = func() error { f.Flush(); return nil }
	}
	sw.enc = json.NewEncoder(&sw.js)
	return sw
}

// Start begins an event stream as the response to an HTTP request: it
// sets the headers (text/event-stream, no caching, no proxy buffering),
// writes status 200 and returns a Writer on w.
func Start(w http.ResponseWriter) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return NewWriter(w)
}

// Send writes ev and flushes. An id or name with a line break, or an id
// with a NUL, is an error: it would not arrive as sent.
func (w *Writer) Send(ev Event) error {
	if err := checkField("id", ev.ID, "\r\n\x00"); err != nil {
		return err
	}
	if err := checkField("event name", ev.Name, "\r\n"); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.send(ev.ID, ev.Name, ev.Data)
}

// SendJSON writes an event named name whose data is v in JSON.
func (w *Writer) SendJSON(name string, v any) error {
	if err := checkField("event name", name, "\r\n"); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.js.Reset()
	if err := w.enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s event: %w", name, err)
	}
	return w.send("", name, bytes.TrimSuffix(w.js.Bytes(), []byte("\n")))
}

// Comment writes a comment, which readers ignore: a keep-alive that stops
// proxies and clients from timing out an idle stream.
func (w *Writer) Comment(text string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = appendLines(w.buf[:0], ":", []byte(text))
	w.buf = append(w.buf, '\n')
	return w.write()
}

// send writes one event; w.mu is held.
func (w *Writer) send(id, name string, data []byte) error {
	b := w.buf[:0]
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	b = appendLines(b, "data:", data)
	w.buf = append(b, '\n')
	return w.write()
}

// appendLines appends text as lines of the field prefix ("data:", ":"),
// each with one space after the prefix.
func appendLines(b []byte, prefix string, text []byte) []byte {
	for {
		i := indexEOL(text)
		if i < 0 {
			b = append(append(append(b, prefix...), ' '), text...)
			return append(b, '\n')
		}
		b = append(append(append(b, prefix...), ' '), text[:i]...)
		b = append(b, '\n')
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
}

// write writes w.buf and flushes; w.mu is held.
func (w *Writer) write() error {
	if _, err := w.w.Write(w.buf); err != nil {
		return err
	}
	if w.flush != nil {
		return w.flush()
	}
	return nil
}

// checkField fails when s, the value of a field, holds one of the bytes
// bad.
func checkField(what, s, bad string) error {
	if strings.ContainsAny(s, bad) {
		return fmt.Errorf("sse: %s %q has a line break or NUL", what, s)
	}
	return nil
}

// indexEOL returns the index of the first CR or LF in b, or -1.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	scan := b
	if i >= 0 {
		scan = b[:i]
	}
	if j := bytes.IndexByte(scan, '\r'); j >= 0 {
		return j
	}
	return i
}

// MaxEventSize bounds the data of one event, and one line, that a Reader
// accepts, so that a broken stream cannot make it buffer without end.
const MaxEventSize = 16 << 20

// ErrTooLarge is returned by Reader.Next for an event or line over
// MaxEventSize.
var ErrTooLarge = errors.New("sse: event exceeds 16 MiB")

// bom is a UTF-8 byte order mark, which may start a stream.
const bom = "\xEF\xBB\xBF"

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	src    io.Reader
	buf    []byte // read buffer: buf[r:w] is unread
	r, w   int
	err    error // the error that ended src, returned once buf is read
	skipLF bool  // the last line ended with a CR that may be half a CRLF
	first  bool  // the next line is the stream's first
	line   []byte
	data   []byte
	name   []byte
	// The last name and id, kept so that a stream that repeats them costs
	// no allocation.
	lastName, id string
}

// NewReader returns a Reader of r. It buffers: it may read beyond the
// events it returned.
func NewReader(r io.Reader) *Reader {
	return &Reader{src: r, buf: make([]byte, 4096), first: true}
}

// Next returns the next event. It returns io.EOF when the stream ends; an
// event the stream cut short is dropped, as the standard says. Events
// without data lines are not dispatched. The event's Data is valid until
// the next call.
func (r *Reader) Next() (Event, error) {
	r.data, r.name = r.data[:0], r.name[:0]
	hasData := false
	for {
		line, err := r.readLine()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if !hasData {
				r.name = r.name[:0]
				continue
			}
			return Event{ID: r.id, Name: r.eventName(), Data: r.data}, nil
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value := line, line[len(line):]
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			r.name = append(r.name[:0], value...)
		case "data":
			if len(r.data)+len(value)+1 > MaxEventSize {
				return Event{}, ErrTooLarge
			}
			if hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 && string(value) != r.id {
				r.id = string(value)
			}
		}
		// retry, and fields the standard does not define, are ignored.
	}
}

// eventName returns the name being read, as a string shared with the
// previous event's when they are equal.
func (r *Reader) eventName() string {
	if len(r.name) == 0 {
		return "message"
	}
	if string(r.name) != r.lastName {
		r.lastName = string(r.name)
	}
	return r.lastName
}

// readLine returns the next line without its end (LF, CRLF or CR). The
// line is valid until the next call. At the end of the stream a last line
// without an end is dropped: it cannot end an event.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if r.r == r.w {
			if r.err != nil {
				return nil, r.err
			}
			r.fill()
			continue
		}
		if r.skipLF {
			r.skipLF = false
			if r.buf[r.r] == '\n' {
				r.r++
				continue
			}
		}
		chunk := r.buf[r.r:r.w]
		i := indexEOL(chunk)
		if i < 0 {
			if len(r.line)+len(chunk) > MaxEventSize {
				return nil, ErrTooLarge
			}
			r.line = append(r.line, chunk...)
			r.r = r.w
			continue
		}
		line := chunk[:i]
		r.r += i + 1
		if chunk[i] == '\r' {
			if i+1 < len(chunk) {
				if chunk[i+1] == '\n' {
					r.r++
				}
			} else {
				r.skipLF = true
			}
		}
		if len(r.line) > 0 {
			if len(r.line)+len(line) > MaxEventSize {
				return nil, ErrTooLarge
			}
			r.line = append(r.line, line...)
			line = r.line
		}
		if r.first {
			r.first = false
			line = bytes.TrimPrefix(line, []byte(bom))
		}
		return line, nil
	}
}

// fill reads more of src into the empty buffer, recording the error that
// ends it.
func (r *Reader) fill() {
	r.r, r.w = 0, 0
	for range 100 {
		n, err := r.src.Read(r.buf)
		r.w = n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}
