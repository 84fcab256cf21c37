package llm

import (
	"errors"
	"io"
)

// EventType is the kind of a stream Event.
type EventType uint8

// The event types. A well-formed stream is EventStart, then blocks (each
// EventBlockStart, EventDelta…, EventBlockStop; blocks may interleave but
// start in index order 0, 1, 2…), then EventEnd; EventError may end it
// anywhere instead.
const (
	EventStart EventType = iota + 1
	EventBlockStart
	EventDelta
	EventBlockStop
	EventEnd
	EventError
)

var eventTypeNames = [...]string{"", "start", "block_start", "delta", "block_stop", "end", "error"}

func (t EventType) String() string {
	if int(t) < len(eventTypeNames) {
		return eventTypeNames[t]
	}
	return "event(?)"
}

// DeltaType is what an EventDelta adds to its block.
type DeltaType uint8

// The delta types.
const (
	DeltaText      DeltaType = iota + 1 // text of a text block
	DeltaArguments                      // a piece of a tool call's JSON arguments
	DeltaThinking                       // thinking text
	DeltaSignature                      // a piece of the block's signature
)

// Event is one canonical stream event. Which fields are used depends on
// Type:
//   - EventStart: ID, Model, and Usage as far as known (input tokens);
//   - EventBlockStart: Index and Block (its Type and, for tool calls, ID,
//     Name, Namespace and Signature; for opaque blocks Raw; text empty);
//   - EventDelta: Index, Delta, Text;
//   - EventBlockStop: Index;
//   - EventEnd: StopReason, StopSequence and the final Usage;
//   - EventError: Err.
type Event struct {
	Type         EventType
	Index        int
	Block        Part
	Delta        DeltaType
	Text         string
	ID           string
	Model        string
	StopReason   StopReason
	StopSequence string
	Usage        Usage
	Err          *Error
}

// StreamDecoder reads canonical events from an upstream's stream as its
// bytes arrive. Next returns io.EOF after the EventEnd (or EventError) of a
// complete stream, and an *Error (kind ErrorUpstream) when the stream breaks
// or ends early.
type StreamDecoder interface {
	Next() (Event, error)
}

// StreamEncoder writes canonical events to a client in one wire format. It
// must see a whole stream: it keeps the state its format needs (open items,
// tool call indices, accumulated text). Encode never calls Flush; the sink
// decides when bytes leave.
type StreamEncoder interface {
	Encode(ev *Event) error
}

// Pump copies a stream from dec to enc, calling flush after each event that
// produced output, and returns the response the events amount to. It stops
// at the end of the stream, at the first error event (encoded, then
// returned), or when either side fails.
func Pump(dec StreamDecoder, enc StreamEncoder, flush func() error) (*Response, error) {
	var acc Accumulator
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			if !acc.Ended() {
				err = Errorf(ErrorUpstream, "upstream stream ended before its end event")
			} else {
				return acc.Response(), nil
			}
		}
		if err != nil {
			e := AsError(err)
			// Tell the client, in its format, before giving up.
			if werr := enc.Encode(&Event{Type: EventError, Err: e}); werr == nil && flush != nil {
				_ = flush()
			}
			return acc.Response(), e
		}
		acc.Add(&ev)
		if err := enc.Encode(&ev); err != nil {
			return acc.Response(), err
		}
		if flush != nil {
			if err := flush(); err != nil {
				return acc.Response(), err
			}
		}
		if ev.Type == EventError {
			return acc.Response(), ev.Err
		}
	}
}

// Accumulator builds a Response from stream events. Its zero value is
// ready to use.
type Accumulator struct {
	resp  Response
	texts [][]byte // per block: text, thinking or arguments
	sigs  [][]byte
	ended bool
}

// Add applies one event.
func (a *Accumulator) Add(ev *Event) {
	switch ev.Type {
	case EventStart:
		a.resp.ID, a.resp.Model = ev.ID, ev.Model
		a.resp.Usage = ev.Usage
	case EventBlockStart:
		if ev.Index < 0 {
			return
		}
		for len(a.resp.Content) <= ev.Index {
			a.resp.Content = append(a.resp.Content, Part{})
			a.texts = append(a.texts, nil)
			a.sigs = append(a.sigs, nil)
		}
		a.resp.Content[ev.Index] = ev.Block
		a.sigs[ev.Index] = append(a.sigs[ev.Index][:0], ev.Block.Signature...)
		switch ev.Block.Type {
		case PartToolCall:
			a.texts[ev.Index] = append(a.texts[ev.Index][:0], ev.Block.Arguments...)
		default:
			a.texts[ev.Index] = append(a.texts[ev.Index][:0], ev.Block.Text...)
		}
	case EventDelta:
		if ev.Index < 0 || ev.Index >= len(a.texts) {
			return
		}
		if ev.Delta == DeltaSignature {
			a.sigs[ev.Index] = append(a.sigs[ev.Index], ev.Text...)
		} else {
			a.texts[ev.Index] = append(a.texts[ev.Index], ev.Text...)
		}
	case EventEnd:
		a.ended = true
		a.resp.StopReason, a.resp.StopSequence = ev.StopReason, ev.StopSequence
		a.resp.Usage = ev.Usage
	}
}

// Ended reports whether the stream's EventEnd was seen.
func (a *Accumulator) Ended() bool { return a.ended }

// Response returns the response so far. Blocks that never started (gaps in
// the indices) are left out.
func (a *Accumulator) Response() *Response {
	r := a.resp
	r.Content = make([]Part, 0, len(a.resp.Content))
	for i, p := range a.resp.Content {
		if p.Type == 0 {
			continue
		}
		switch p.Type {
		case PartToolCall:
			p.Arguments = string(a.texts[i])
		default:
			p.Text = string(a.texts[i])
		}
		p.Signature = string(a.sigs[i])
		if p.Type == PartText && p.Signature == "" {
			p.Origin = "" // Origin marks parts with something only it can read
		}
		r.Content = append(r.Content, p)
	}
	return &r
}

// ResponseEvents is the event sequence of a complete response, as a
// streaming upstream would send it: text and arguments are split into
// pieces of at most chunk bytes (whole runes), so that consumers see
// arguments arrive in pieces. chunk <= 0 sends each block in one delta.
func ResponseEvents(r *Response, chunk int) []Event {
	evs := []Event{{Type: EventStart, ID: r.ID, Model: r.Model, Usage: Usage{InputTokens: r.Usage.InputTokens, CachedTokens: r.Usage.CachedTokens, CacheWriteTokens: r.Usage.CacheWriteTokens}}}
	for i, p := range r.Content {
		block := p
		var body string
		var kind DeltaType
		switch p.Type {
		case PartText:
			body, kind, block.Text = p.Text, DeltaText, ""
		case PartThinking:
			body, kind, block.Text = p.Text, DeltaThinking, ""
			if !p.Redacted {
				block.Signature = ""
			}
		case PartToolCall:
			body, kind, block.Arguments = p.Arguments, DeltaArguments, ""
		}
		evs = append(evs, Event{Type: EventBlockStart, Index: i, Block: block})
		for _, piece := range splitPieces(body, chunk) {
			evs = append(evs, Event{Type: EventDelta, Index: i, Delta: kind, Text: piece})
		}
		if p.Type == PartThinking && !p.Redacted && p.Signature != "" {
			evs = append(evs, Event{Type: EventDelta, Index: i, Delta: DeltaSignature, Text: p.Signature})
		}
		evs = append(evs, Event{Type: EventBlockStop, Index: i})
	}
	return append(evs, Event{Type: EventEnd, StopReason: r.StopReason, StopSequence: r.StopSequence, Usage: r.Usage})
}

func splitPieces(s string, n int) []string {
	if s == "" {
		return nil
	}
	if n <= 0 || len(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !runeStart(s[cut]) {
			cut--
		}
		if cut == 0 { // a rune longer than n: take it whole
			cut = n
			for cut < len(s) && !runeStart(s[cut]) {
				cut++
			}
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// SliceDecoder is a StreamDecoder over a fixed list of events, for replays
// and tests.
type SliceDecoder struct {
	Events []Event
	i      int
}

// Next implements StreamDecoder.
func (d *SliceDecoder) Next() (Event, error) {
	if d.i >= len(d.Events) {
		return Event{}, io.EOF
	}
	d.i++
	return d.Events[d.i-1], nil
}
