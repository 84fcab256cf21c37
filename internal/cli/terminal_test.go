package cli

import (
	"bytes"
	"errors"
	"testing"
)

// escapeWriter detaches at ~. at the start of a line only, sends ~~ as
// one ~ and any other ~ as it is, whichever writes cut the keystrokes.
func TestEscapeWriter(t *testing.T) {
	tests := []struct {
		name, in, sent string
		detached       bool
	}{
		{"plain", "ls -l\r", "ls -l\r", false},
		{"detach at the start", "~.", "", true},
		{"detach after a line", "echo hi\r~.after", "echo hi\r", true},
		{"detach after a newline", "a\n~.", "a\n", true},
		{"not mid-line", "a~.b", "a~.b", false},
		{"tilde tilde", "~~.", "~.", false},
		{"tilde then other", "~x\r", "~x\r", false},
		{"home directory", "cd ~/src\r", "cd ~/src\r", false},
		{"tilde at line start then tilde", "\r~~\r~.", "\r~\r", true},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 2, 100} {
			var sent bytes.Buffer
			detached := false
			ew := &escapeWriter{w: &sent, detach: func() { detached = true }}
			var err error
			for i := 0; i < len(tt.in) && err == nil; i += size {
				_, err = ew.Write([]byte(tt.in[i:min(i+size, len(tt.in))]))
			}
			if detached != tt.detached || detached != errors.Is(err, errDetached) {
				t.Errorf("%s in writes of %d: detached %v (%v), want %v", tt.name, size, detached, err, tt.detached)
			}
			if sent.String() != tt.sent {
				t.Errorf("%s in writes of %d: sent %q, want %q", tt.name, size, sent.String(), tt.sent)
			}
		}
	}
}
