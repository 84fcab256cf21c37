package client

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []event
	}{
		{
			name:   "one event",
			stream: "event: exit\ndata: {}\n\n",
			want:   []event{{"exit", []byte("{}")}},
		},
		{
			name:   "multi-line data joined with newlines",
			stream: "event: stdout\ndata: line1\ndata:line2\ndata: \n\n",
			want:   []event{{"stdout", []byte("line1\nline2\n")}},
		},
		{
			name:   "default name, comments, unknown fields",
			stream: ": hello\nid: 7\nretry: 100\ndata: x\n\n",
			want:   []event{{"message", []byte("x")}},
		},
		{
			name:   "CRLF lines",
			stream: "event: a\r\ndata: 1\r\n\r\nevent: b\r\ndata: 2\r\n\r\n",
			want:   []event{{"a", []byte("1")}, {"b", []byte("2")}},
		},
		{
			name:   "an event without data is dropped",
			stream: "event: ping\n\nevent: a\ndata: 1\n\n",
			want:   []event{{"a", []byte("1")}},
		},
		{
			name:   "colon in the value",
			stream: "data: {\"a\":\"b: c\"}\n\n",
			want:   []event{{"message", []byte(`{"a":"b: c"}`)}},
		},
		{
			name:   "a cut-off event is dropped",
			stream: "event: a\ndata: 1\n\nevent: b\ndata: 2\n",
			want:   []event{{"a", []byte("1")}},
		},
		{
			name:   "long line",
			stream: "data: " + strings.Repeat("x", 10000) + "\n\n",
			want:   []event{{"message", []byte(strings.Repeat("x", 10000))}},
		},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	}
	for _, tt := range tests {
		for rname, newReader := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				r := newSSEReader(newReader(tt.stream))
				var got []event
				for {
					ev, err := r.next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, ev)
				}
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(event{})); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestSSEReaderBounds(t *testing.T) {
	big := "data: " + strings.Repeat("x", maxEventBytes/2) + "\n"
	r := newSSEReader(strings.NewReader(big + big + big + "\n"))
	if _, err := r.next(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("next on an oversized event: %v, want a size error", err)
	}
}
