package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/google/go-cmp/cmp"
)

func TestProgress(t *testing.T) {
	type step struct {
		after time.Duration // since the previous event
		ev    api.ImageProgress
	}
	dl := func(cur int64) api.ImageProgress {
		return api.ImageProgress{Phase: "download", Item: "sha256:abc", Current: cur, Total: 4 << 20}
	}
	steps := []step{
		{0, api.ImageProgress{Phase: "resolve", Item: "alpine"}},
		{0, dl(0)},
		{10 * time.Millisecond, dl(1 << 20)},  // too soon for either
		{200 * time.Millisecond, dl(2 << 20)}, // a redraw on a terminal
		{200 * time.Millisecond, dl(3 << 20)},
		{10 * time.Millisecond, dl(4 << 20)}, // complete: always shown
		{3 * time.Second, dl(4 << 20)},       // nothing new: not repeated
		{0, api.ImageProgress{Phase: "unpack", Item: "a-very-long-layer-digest-that-does-not-fit-in-sixty-columns-at-all", Current: 5000}},
		{200 * time.Millisecond, api.ImageProgress{Phase: "unpack", Item: "a-very-long-layer-digest-that-does-not-fit-in-sixty-columns-at-all", Current: 5}},
	}
	tests := []struct {
		tty  bool
		want string
	}{
		{
			tty: false,
			want: "resolve alpine\n" +
				"download sha256:abc [>               ] 0 B/4.0 MiB   0%\n" +
				"download sha256:abc [================] 4.0 MiB/4.0 MiB 100%\n" +
				"unpack a-very-long-layer-digest-tha...t-fit-in-sixty-columns-at-all 4.9 KiB\n",
		},
		{
			tty: true,
			want: "\rresolve alpine\n" +
				"\rdownload sha256:abc [>               ] 0 B/4.0 MiB   0%" +
				"\rdownload sha256:abc [========>       ] 2.0 MiB/4.0 MiB  50%" +
				"\rdownload sha256:abc [============>   ] 3.0 MiB/4.0 MiB  75%" +
				"\rdownload sha256:abc [================] 4.0 MiB/4.0 MiB 100%\n" +
				"\runpack a-very-long-layer-digest-tha...t-fit-in-sixty-columns-at-all 4.9 KiB" +
				"\runpack a-very-long-layer-digest-tha...t-fit-in-sixty-columns-at-all 5 B    \n", // padded over the longer line
		},
	}
	for _, tt := range tests {
		name := "plain"
		if tt.tty {
			name = "terminal"
		}
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
			p := &progress{w: &buf, tty: tt.tty, now: func() time.Time { return now }}
			for _, s := range steps {
				now = now.Add(s.after)
				p.update(s.ev)
			}
			p.done()
			if diff := cmp.Diff(tt.want, buf.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	tests := map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB", 1 << 62: "4.0 EiB"}
	for n, want := range tests {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
