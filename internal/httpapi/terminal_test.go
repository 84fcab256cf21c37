package httpapi

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// utf8Writer never emits a cut character, whichever write cuts it, and
// loses nothing.
func TestUTF8Writer(t *testing.T) {
	text := []byte(strings.Repeat("a─é😀", 50))
	for size := 1; size <= 9; size++ {
		var got bytes.Buffer
		w := &utf8Writer{emit: func(p []byte) error {
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
		if err := w.flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), text) {
			t.Errorf("writes of %d: %q", size, got.Bytes())
		}
	}
	// Invalid bytes are passed on, not held back for ever.
	var got []byte
	w := &utf8Writer{emit: func(p []byte) error { got = append(got, p...); return nil }}
	w.Write([]byte{'x', 0xff})
	if !bytes.Equal(got, []byte{'x', 0xff}) {
		t.Errorf("invalid byte: emitted %q", got)
	}
}
