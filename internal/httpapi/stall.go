package httpapi

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// StallTimeout returns a middleware that ends a request whose client
// stops: reading the request body fails once no byte has come for d, and
// writing the response fails once the client has taken no byte for d.
// Each read or write gets a fresh deadline, so a large upload or download
// on a slow link goes on as long as it moves, and the time a handler
// spends working between reads and writes (a long exec, an idle event
// stream) does not count. A hijacked connection (a WebSocket through the
// port gateway) is left without deadlines. d <= 0 returns next as is.
//
// It needs the connection's deadlines (http.ResponseController), which
// the net/http server has; elsewhere it does nothing.
func StallTimeout(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			// A deadline left from the connection's previous request must
			// not cut this one.
			_ = rc.SetWriteDeadline(time.Time{})
			sw := &stallWriter{ResponseWriter: w, rc: rc, d: d}
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = &stallBody{ReadCloser: r.Body, rc: rc, d: d}
			}
			next.ServeHTTP(sw, r)
			if !sw.hijacked {
				// The server flushes what is buffered after the handler.
				_ = rc.SetWriteDeadline(time.Now().Add(d))
			}
		})
	}
}

// stallBody gives each read of a request body a fresh deadline.
type stallBody struct {
	io.ReadCloser
	rc *http.ResponseController
	d  time.Duration
}

func (b *stallBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		// At the body's end the server reads on in the background to see
		// the client go away; a deadline there would cancel the request
		// while its handler still works. (After an error the deadline
		// stays: the server then reads out what is left of the body.)
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// stallWriter gives each write of a response a fresh deadline.
type stallWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	d        time.Duration
	hijacked bool
}

func (w *stallWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

// FlushError flushes with a fresh deadline; http.ResponseController and
// the SSE writer find it.
func (w *stallWriter) FlushError() error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.rc.Flush()
}

// Flush is for handlers that assert http.Flusher.
func (w *stallWriter) Flush() { _ = w.FlushError() }

// Hijack hands the connection over without deadlines.
func (w *stallWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := w.rc.Hijack()
	if err == nil {
		w.hijacked = true
		_ = conn.SetDeadline(time.Time{})
	}
	return conn, brw, err
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
