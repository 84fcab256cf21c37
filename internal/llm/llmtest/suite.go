package llmtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agent2env/agent2env/internal/llm"
)

// CmpOpts compare canonical values: nil and empty are the same.
var CmpOpts = []cmp.Option{cmpopts.EquateEmpty()}

// Run runs the conformance suite on c: every case's request, response and
// stream through c and back, checked against ExpectRequest and
// ExpectResponse; streams decoded a byte at a time and checked for shape;
// a decoder that yields events before the stream is over; errors, in and
// mid-stream; bad input; and truncated upstream streams.
func Run(t *testing.T, c llm.Codec) {
	f := c.Format()
	for _, tc := range Cases() {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("request/%s/stream=%v", tc.Name, stream), func(t *testing.T) {
				req := CloneRequest(tc.Request)
				req.Stream = stream
				PrepareRequest(f, req)
				body, err := c.EncodeRequest(req)
				if err != nil {
					t.Fatalf("EncodeRequest: %v", err)
				}
				got, err := c.DecodeRequest(body)
				if err != nil {
					t.Fatalf("DecodeRequest(%s): %v", body, err)
				}
				if f == llm.FormatGemini { // in the URL
					got.Model, got.Stream = req.Model, req.Stream
				}
				want := ExpectRequest(f, req)
				if d := cmp.Diff(want, got, CmpOpts...); d != "" {
					t.Errorf("request round trip (-want +got):\n%s\nbody: %s", d, body)
				}
			})
		}
		t.Run("response/"+tc.Name, func(t *testing.T) {
			req, resp := prepared(f, tc)
			body, err := c.EncodeResponse(req, resp)
			if err != nil {
				t.Fatalf("EncodeResponse: %v", err)
			}
			got, err := c.DecodeResponse(body)
			if err != nil {
				t.Fatalf("DecodeResponse(%s): %v", body, err)
			}
			if d := cmp.Diff(ExpectResponse(f, req, resp, false), got, CmpOpts...); d != "" {
				t.Errorf("response round trip (-want +got):\n%s\nbody: %s", d, body)
			}
		})
		t.Run("stream/"+tc.Name, func(t *testing.T) {
			req, resp := prepared(f, tc)
			wire := EncodeStream(t, c, req, llm.ResponseEvents(resp, 5))
			evs, err := DecodeStream(c, iotest.OneByteReader(bytes.NewReader(wire)))
			if err != nil {
				t.Fatalf("decode stream: %v\nstream:\n%s", err, wire)
			}
			if err := CheckStream(evs); err != nil {
				t.Fatalf("decoded stream: %v\nstream:\n%s", err, wire)
			}
			var acc llm.Accumulator
			for i := range evs {
				acc.Add(&evs[i])
			}
			if d := cmp.Diff(ExpectResponse(f, req, resp, true), acc.Response(), CmpOpts...); d != "" {
				t.Errorf("stream round trip (-want +got):\n%s\nstream:\n%s", d, wire)
			}
		})
	}
	t.Run("stream_incremental", func(t *testing.T) { testIncremental(t, c) })
	t.Run("errors", func(t *testing.T) { testErrors(t, c) })
	t.Run("stream_error", func(t *testing.T) { testStreamError(t, c) })
	t.Run("bad_requests", func(t *testing.T) { testBadRequests(t, c) })
	t.Run("truncated_stream", func(t *testing.T) { testTruncated(t, c) })
}

func prepared(f llm.Format, tc Case) (*llm.Request, *llm.Response) {
	req, resp := CloneRequest(tc.Request), CloneResponse(tc.Response)
	req.Stream, req.StreamUsage = true, true
	PrepareRequest(f, req)
	Prepare(f, resp.Content)
	return req, resp
}

// EncodeStream encodes evs with c's stream encoder for req.
func EncodeStream(t testing.TB, c llm.Codec, req *llm.Request, evs []llm.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := c.NewStreamEncoder(llm.NewSSEWriter(&buf), req)
	for i := range evs {
		if err := enc.Encode(&evs[i]); err != nil {
			t.Fatalf("encode %v: %v", evs[i].Type, err)
		}
	}
	return buf.Bytes()
}

// DecodeStream decodes a whole stream with c's stream decoder.
func DecodeStream(c llm.Codec, r io.Reader) ([]llm.Event, error) {
	dec := c.NewStreamDecoder(llm.NewSSEReader(r))
	var evs []llm.Event
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// CheckStream reports how evs is not a well-formed canonical stream: a
// start, blocks started in index order and stopped, deltas only to open
// blocks, an end or an error last.
func CheckStream(evs []llm.Event) error {
	if len(evs) == 0 || evs[0].Type != llm.EventStart {
		return errors.New("stream does not begin with a start event")
	}
	var open []bool
	for i, ev := range evs[1:] {
		switch ev.Type {
		case llm.EventStart:
			return fmt.Errorf("event %d: a second start", i+1)
		case llm.EventBlockStart:
			if ev.Index != len(open) {
				return fmt.Errorf("event %d: block %d started, want %d", i+1, ev.Index, len(open))
			}
			open = append(open, true)
		case llm.EventDelta, llm.EventBlockStop:
			if ev.Index < 0 || ev.Index >= len(open) || !open[ev.Index] {
				return fmt.Errorf("event %d: %v for block %d, which is not open", i+1, ev.Type, ev.Index)
			}
			if ev.Type == llm.EventBlockStop {
				open[ev.Index] = false
			}
		case llm.EventEnd, llm.EventError:
			if i+2 != len(evs) {
				return fmt.Errorf("event %d: %v before the last event", i+1, ev.Type)
			}
			if ev.Type == llm.EventEnd {
				for b, o := range open {
					if o {
						return fmt.Errorf("block %d never stopped", b)
					}
				}
			}
			return nil
		}
	}
	return errors.New("stream has no end event")
}

var errGate = errors.New("read past the gate")

// gated serves data[:gate] and then fails every read until opened.
type gated struct {
	data       []byte
	pos, gate  int
	opened     bool
	readClosed bool
}

func (g *gated) Read(p []byte) (int, error) {
	limit := len(g.data)
	if !g.opened {
		limit = g.gate
	}
	if g.pos >= limit {
		if g.pos >= len(g.data) {
			return 0, io.EOF
		}
		return 0, errGate
	}
	n := copy(p, g.data[g.pos:limit])
	g.pos += n
	return n, nil
}

// testIncremental shows the decoder yields events as the bytes of the
// first SSE events arrive, without waiting for the rest.
func testIncremental(t *testing.T, c llm.Codec) {
	var tc Case
	for _, x := range Cases() {
		if x.Name == "parallel_calls" {
			tc = x
		}
	}
	req, resp := prepared(c.Format(), tc)
	wire := EncodeStream(t, c, req, llm.ResponseEvents(resp, 3))
	gate := 0
	for range 3 {
		i := bytes.Index(wire[gate:], []byte("\n\n"))
		if i < 0 {
			t.Fatalf("stream has fewer than 3 events:\n%s", wire)
		}
		gate += i + 2
	}
	g := &gated{data: wire, gate: gate}
	dec := c.NewStreamDecoder(llm.NewSSEReader(g))
	ev, err := dec.Next()
	if err != nil {
		t.Fatalf("first event with %d of %d bytes available: %v", gate, len(wire), err)
	}
	if ev.Type != llm.EventStart {
		t.Errorf("first event is %v, want start", ev.Type)
	}
	g.opened = true
	n := 1
	for {
		_, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after the gate opened: %v", err)
		}
		n++
	}
	if n < 8 {
		t.Errorf("decoded %d events, want the whole stream", n)
	}
}

var errorKinds = []llm.ErrorKind{
	llm.ErrorInvalidRequest, llm.ErrorAuthentication, llm.ErrorPermission, llm.ErrorNotFound,
	llm.ErrorTooLarge, llm.ErrorRateLimit, llm.ErrorInternal, llm.ErrorOverloaded, llm.ErrorTimeout,
}

func testErrors(t *testing.T, c llm.Codec) {
	for _, kind := range errorKinds {
		in := &llm.Error{Kind: kind, Message: "something about " + string(kind)}
		status, body := c.EncodeError(in)
		if status < 400 {
			t.Errorf("%s: status %d", kind, status)
		}
		if kind == llm.ErrorRateLimit && status != 429 {
			t.Errorf("rate limit: status %d, want 429", status)
		}
		got := c.DecodeError(status, body)
		if got.Kind != kind || got.Message != in.Message {
			t.Errorf("%s: decoded %+v from %d %s", kind, got, status, body)
		}
	}
}

func testStreamError(t *testing.T, c llm.Codec) {
	req := &llm.Request{Model: "m", Stream: true, StreamUsage: true}
	evs := []llm.Event{
		{Type: llm.EventStart, ID: "msg_e", Model: "m"},
		{Type: llm.EventBlockStart, Index: 0, Block: llm.Part{Type: llm.PartText}},
		{Type: llm.EventDelta, Index: 0, Delta: llm.DeltaText, Text: "partial"},
		{Type: llm.EventError, Err: &llm.Error{Kind: llm.ErrorRateLimit, Message: "slow down"}},
	}
	wire := EncodeStream(t, c, req, evs)
	got, err := DecodeStream(c, bytes.NewReader(wire))
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, wire)
	}
	last := got[len(got)-1]
	if last.Type != llm.EventError || last.Err == nil || last.Err.Message != "slow down" {
		t.Fatalf("last event %+v, want the error\n%s", last, wire)
	}
	if err := CheckStream(got); err != nil {
		t.Errorf("%v\n%s", err, wire)
	}
}

// BadRequests are bodies no decoder may accept.
var BadRequests = []string{
	"", "{", "[]", `"text"`, "nul", `{"messages":5,"input":5,"contents":5}`,
	`{"model":"m","messages":[{"role":"wizard","content":"x"}],"input":[{"role":"wizard","content":"x"}],"contents":[{"role":"wizard","parts":[]}]}`,
}

func testBadRequests(t *testing.T, c llm.Codec) {
	for _, body := range BadRequests {
		_, err := c.DecodeRequest([]byte(body))
		CheckClientError(t, c, body, err)
	}
}

// CheckClientError checks that err, from decoding a client's bad input, is
// an *llm.Error that reaches the client as a 4xx in its format.
func CheckClientError(t testing.TB, c llm.Codec, input string, err error) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Errorf("DecodeRequest(%q) = %v, want an *llm.Error", input, err)
		return
	}
	status, body := c.EncodeError(e)
	if status < 400 || status >= 500 || len(body) == 0 {
		t.Errorf("DecodeRequest(%q): error answered with %d %s", input, status, body)
	}
}

func testTruncated(t *testing.T, c llm.Codec) {
	var tc Case
	for _, x := range Cases() {
		if x.Name == "parallel_calls" {
			tc = x
		}
	}
	req, resp := prepared(c.Format(), tc)
	wire := EncodeStream(t, c, req, llm.ResponseEvents(resp, 3))
	for _, cut := range []int{1, len(wire) / 3, len(wire) / 2, len(wire) * 2 / 3} {
		_, err := DecodeStream(c, bytes.NewReader(wire[:cut]))
		var e *llm.Error
		if !errors.As(err, &e) || e.Kind != llm.ErrorUpstream {
			t.Errorf("stream cut at %d of %d: err %v, want an upstream error", cut, len(wire), err)
		}
	}
}

// SameWithSlowPath decodes every case's stream (in pieces of 1 and 3
// bytes and whole) and the given sample files with c, once as it is and
// once with its fast path turned off by slow(true): the events must be the
// same.
func SameWithSlowPath(t *testing.T, c llm.Codec, slow func(bool), samples ...string) {
	var streams [][]byte
	for _, tc := range Cases() {
		req, resp := prepared(c.Format(), tc)
		for _, chunk := range []int{1, 3, 0} {
			streams = append(streams, EncodeStream(t, c, req, llm.ResponseEvents(resp, chunk)))
		}
	}
	for _, name := range samples {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, b)
	}
	for i, s := range streams {
		fast, ferr := DecodeStream(c, bytes.NewReader(s))
		slow(true)
		want, werr := DecodeStream(c, bytes.NewReader(s))
		slow(false)
		if d := cmp.Diff(want, fast, CmpOpts...); d != "" || (ferr == nil) != (werr == nil) {
			t.Errorf("stream %d: the fast path differs (-slow +fast):\n%s\nerrors: %v, %v", i, d, werr, ferr)
		}
	}
}
