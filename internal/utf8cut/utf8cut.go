// Package utf8cut passes a stream of output on in pieces that never cut a
// UTF-8 character: a surface that sends each piece as text (a JSON string,
// an event) would otherwise turn both halves of a character its reads
// happened to cut into U+FFFD.
package utf8cut

import "unicode/utf8"

// Writer passes its writes to Emit without cutting a UTF-8 character: an
// incomplete one at the end waits for the next write, or Flush. Bytes that
// are not UTF-8 are passed on as they come, not held back.
type Writer struct {
	Emit func([]byte) error
	// Bytes passes every write on whole, for a stream sent as bytes
	// (base64), which no cut spoils.
	Bytes bool
	tail  []byte
}

// Write emits p, less an incomplete character at its end, after what the
// last write held back. It returns len(p) unless Emit fails.
func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	if len(w.tail) > 0 {
		p = append(w.tail, p...)
		w.tail = nil
	}
	cut := len(p)
	if !w.Bytes {
		cut = Complete(p)
	}
	if cut < len(p) {
		w.tail = append([]byte(nil), p[cut:]...)
		p = p[:cut]
	}
	if len(p) > 0 {
		if err := w.Emit(p); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Flush emits what the last write held back, complete or not: the stream
// has ended, or jumps.
func (w *Writer) Flush() error {
	if len(w.tail) == 0 {
		return nil
	}
	p := w.tail
	w.tail = nil
	return w.Emit(p)
}

// Complete is the length of p without an incomplete UTF-8 character at its
// end (invalid bytes count as complete: they are not held back).
func Complete(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if !utf8.RuneStart(p[i]) {
			continue
		}
		if !utf8.FullRune(p[i:]) {
			return i
		}
		break
	}
	return len(p)
}
