package utf8cut

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// A Writer never emits a cut character, whichever write cuts it, and
// loses nothing.
func TestWriter(t *testing.T) {
	text := []byte(strings.Repeat("a─é😀", 50))
	for size := 1; size <= 9; size++ {
		var got bytes.Buffer
		w := &Writer{Emit: func(p []byte) error {
			if !utf8.Valid(p) {
				t.Fatalf("writes of %d: emitted %q, a cut character", size, p)
			}
			got.Write(p)
			return nil
		}}
		for i := 0; i < len(text); i += size {
			if n, err := w.Write(text[i:min(i+size, len(text))]); err != nil || n != min(size, len(text)-i) {
				t.Fatalf("write: %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), text) {
			t.Errorf("writes of %d: %q", size, got.Bytes())
		}
	}
	// Invalid bytes are passed on, not held back for ever; a cut
	// character at the end goes at Flush.
	var got []byte
	w := &Writer{Emit: func(p []byte) error { got = append(got, p...); return nil }}
	w.Write([]byte{'x', 0xff})
	if !bytes.Equal(got, []byte{'x', 0xff}) {
		t.Errorf("invalid byte: emitted %q", got)
	}
	w.Write([]byte("é")[:1])
	if err := w.Flush(); err != nil || !bytes.Equal(got, []byte{'x', 0xff, 0xc3}) {
		t.Errorf("flushed %q, %v", got, err)
	}
	// Bytes passes every write on whole.
	got = nil
	b := &Writer{Emit: func(p []byte) error { got = append(got, p...); return nil }, Bytes: true}
	b.Write([]byte("é")[:1])
	if !bytes.Equal(got, []byte{0xc3}) {
		t.Errorf("bytes: emitted %q", got)
	}
}
