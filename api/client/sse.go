package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxEventBytes bounds one Server-Sent Event, so that a broken stream
// cannot make the client buffer without end.
const maxEventBytes = 16 << 20

// event is one Server-Sent Event.
type event struct {
	name string
	data []byte
}

// sseReader reads Server-Sent Events (the text/event-stream format of the
// HTML living standard) from a response body. It is not safe for
// concurrent use.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReader(r)}
}

// next returns the next event. It returns io.EOF when the stream ends
// between events; an event the stream cut short is dropped, as the
// standard says, and also ends in io.EOF.
func (s *sseReader) next() (event, error) {
	var ev event
	var size int
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			return event{}, err
		}
		if size += len(line); size > maxEventBytes {
			return event{}, fmt.Errorf("server-sent event exceeds %d bytes", maxEventBytes)
		}
		if len(line) == 0 {
			if !hasData {
				// An event without data is not dispatched.
				ev = event{}
				continue
			}
			if ev.name == "" {
				ev.name = "message"
			}
			return ev, nil
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "": // a comment line, such as a keep-alive
		case "event":
			ev.name = string(value)
		case "data":
			if hasData {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, value...)
			hasData = true
		}
	}
}

// readLine returns the next line without its LF or CRLF terminator. (The
// standard also allows a lone CR, which agent2env's daemon never sends.)
func (s *sseReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(line)+len(chunk) > maxEventBytes {
			return nil, fmt.Errorf("server-sent event line exceeds %d bytes", maxEventBytes)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			// A final line without terminator cannot end an event.
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}
