package client

import (
	"errors"
	"testing"
)

// TestWrapf checks that an operation's words are said once: the daemon's
// message that begins with them is not wrapped again.
func TestWrapf(t *testing.T) {
	tests := []struct {
		name   string
		msg    string // the daemon's
		format string
		args   []any
		want   string
	}{
		{"subject resolved by the daemon", "pull image docker.io/library/x:1: not found", "pull image %s", []any{"x:1"},
			"pull image docker.io/library/x:1: not found"},
		{"other words", "image x not found", "pull image %s", []any{"x"}, "pull image x: image x not found"},
		{"operation then colon", "import images: empty archive", "import images", nil, "import images: empty archive"},
		{"operation then its subject", "import images from /tmp/i.tar: read tar: unexpected EOF", "import images", nil,
			"import images from /tmp/i.tar: read tar: unexpected EOF"},
		{"longer word", "import imagesets: x", "import images", nil, "import images: import imagesets: x"},
		{"no subject given", "sandbox id is empty", "exec", nil, "exec: sandbox id is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wrapf(errors.New(tt.msg), tt.format, tt.args...).Error(); got != tt.want {
				t.Errorf("wrapf(%q, %q) = %q, want %q", tt.msg, tt.format, got, tt.want)
			}
		})
	}
}
