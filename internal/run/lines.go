package run

import (
	"bytes"
	"sync"
)

// maxLine is the longest line a lineWriter holds; a longer one is passed
// on in pieces of this size.
const maxLine = 1 << 20

// lineWriter is an io.Writer that passes each line written to it, without
// its line end, to fn; Close passes the last, unterminated one. It is
// safe for concurrent use.
type lineWriter struct {
	mu  sync.Mutex
	fn  func([]byte)
	buf []byte
}

func newLineWriter(fn func([]byte)) *lineWriter { return &lineWriter{fn: fn} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.fn(bytes.TrimSuffix(w.buf[:i], []byte("\r")))
		w.buf = w.buf[i+1:]
	}
	for len(w.buf) >= maxLine {
		w.fn(w.buf[:maxLine])
		w.buf = w.buf[maxLine:]
	}
	// Keep the buffer from growing with what was consumed.
	w.buf = append([]byte(nil), w.buf...)
	return len(p), nil
}

// Pending returns the unterminated line held (a copy).
func (w *lineWriter) Pending() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.buf...)
}

// Close passes on what is left.
func (w *lineWriter) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.fn(w.buf)
		w.buf = nil
	}
}
