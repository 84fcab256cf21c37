package anthropic

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

// NewStreamEncoder implements llm.Codec.
func (Codec) NewStreamEncoder(sink llm.SSESink, req *llm.Request) llm.StreamEncoder {
	return &streamEncoder{sink: sink}
}

type streamEncoder struct {
	sink    llm.SSESink
	j       wire.W
	started bool
	ended   bool
	next    int        // the next Anthropic block index
	blocks  []encBlock // by canonical index
}

type encBlock struct {
	index int // Anthropic index; -1 for a block this format does not show
	part  llm.Part
	open  bool
}

func (e *streamEncoder) emit(name string) error {
	return e.sink.WriteEvent(name, e.j.B)
}

func (e *streamEncoder) start(ev *llm.Event) error {
	e.started = true
	e.j.Reset()
	e.j.Obj().KStr("type", "message_start").KObj("message").
		KStr("id", messageID(ev.ID)).KStr("type", "message").KStr("role", "assistant").KStr("model", ev.Model).
		KArr("content").End().Key("stop_reason").Null().Key("stop_sequence").Null()
	writeUsage(&e.j, ev.Usage)
	e.j.End().End()
	return e.emit("message_start")
}

// Encode implements llm.StreamEncoder.
func (e *streamEncoder) Encode(ev *llm.Event) error {
	if e.ended {
		return nil
	}
	if !e.started && ev.Type != llm.EventError {
		start := ev
		if ev.Type != llm.EventStart {
			start = &llm.Event{}
		}
		if err := e.start(start); err != nil {
			return err
		}
		if ev.Type == llm.EventStart {
			return nil
		}
	}
	switch ev.Type {
	case llm.EventBlockStart:
		return e.blockStart(ev)
	case llm.EventDelta:
		return e.delta(ev)
	case llm.EventBlockStop:
		return e.blockStop(ev.Index)
	case llm.EventEnd:
		for i := range e.blocks {
			if err := e.blockStop(i); err != nil {
				return err
			}
		}
		e.ended = true
		e.j.Reset()
		e.j.Obj().KStr("type", "message_delta").KObj("delta")
		writeStopReason(&e.j, ev.StopReason)
		writeStopSequence(&e.j, ev.StopSequence)
		e.j.End()
		writeUsage(&e.j, ev.Usage)
		e.j.End()
		if err := e.emit("message_delta"); err != nil {
			return err
		}
		e.j.Reset()
		e.j.Obj().KStr("type", "message_stop").End()
		return e.emit("message_stop")
	case llm.EventError:
		e.ended = true
		e.j.Reset()
		e.j.B = append(e.j.B, errorBody(ev.Err)...)
		return e.emit("error")
	}
	return nil
}

func (e *streamEncoder) blockStart(ev *llm.Event) error {
	for len(e.blocks) <= ev.Index {
		e.blocks = append(e.blocks, encBlock{index: -1})
	}
	b := &e.blocks[ev.Index]
	b.part = ev.Block
	if !writable(&b.part, true) {
		return nil
	}
	b.index, b.open = e.next, true
	e.next++
	e.j.Reset()
	e.j.Obj().KStr("type", "content_block_start").KInt("index", b.index).Key("content_block")
	p := b.part
	switch p.Type {
	case llm.PartToolCall:
		e.j.Obj().KStr("type", "tool_use").KStr("id", p.ID).KStr("name", llm.QualifiedName(p.Namespace, p.Name)).
			KRaw("input", json.RawMessage("{}")).End()
	case llm.PartThinking:
		if p.Redacted && p.Origin == llm.FormatAnthropic {
			e.j.Obj().KStr("type", "redacted_thinking").KStr("data", p.Signature).End()
		} else {
			e.j.Obj().KStr("type", "thinking").KStr("thinking", "").KStr("signature", "").End()
		}
	case llm.PartOpaque:
		e.j.Raw(p.Raw)
	default: // text, and images, which Anthropic never streams: shown as text
		e.j.Obj().KStr("type", "text").KStr("text", "").End()
	}
	e.j.End()
	return e.emit("content_block_start")
}

func (e *streamEncoder) delta(ev *llm.Event) error {
	if ev.Index < 0 || ev.Index >= len(e.blocks) || e.blocks[ev.Index].index < 0 {
		return nil
	}
	b := &e.blocks[ev.Index]
	e.j.Reset()
	e.j.Obj().KStr("type", "content_block_delta").KInt("index", b.index).KObj("delta")
	switch ev.Delta {
	case llm.DeltaText:
		e.j.KStr("type", "text_delta").KStr("text", ev.Text)
	case llm.DeltaArguments:
		e.j.KStr("type", "input_json_delta").KStr("partial_json", ev.Text)
	case llm.DeltaThinking:
		e.j.KStr("type", "thinking_delta").KStr("thinking", ev.Text)
	case llm.DeltaSignature:
		if b.part.Origin != llm.FormatAnthropic || b.part.Redacted {
			return nil
		}
		e.j.KStr("type", "signature_delta").KStr("signature", ev.Text)
	default:
		return nil
	}
	e.j.End().End()
	return e.emit("content_block_delta")
}

func (e *streamEncoder) blockStop(i int) error {
	if i < 0 || i >= len(e.blocks) || !e.blocks[i].open {
		return nil
	}
	e.blocks[i].open = false
	e.j.Reset()
	e.j.Obj().KStr("type", "content_block_stop").KInt("index", e.blocks[i].index).End()
	return e.emit("content_block_stop")
}

// NewStreamDecoder implements llm.Codec.
func (Codec) NewStreamDecoder(src llm.SSESource) llm.StreamDecoder {
	return &streamDecoder{src: src}
}

type streamDecoder struct {
	src     llm.SSESource
	scratch streamEvent
	q       wire.Queue
	stop    string
	seq     string
	usage   usage
	started bool
	args    []int // per block: bytes of tool call arguments seen, -1 for other blocks
}

type streamEvent struct {
	Type         string    `json:"type"`
	Message      *response `json:"message"`
	Index        int       `json:"index"`
	ContentBlock *block    `json:"content_block"`
	Delta        struct {
		Type         string `json:"type"`
		Text         string `json:"text"`
		PartialJSON  string `json:"partial_json"`
		Thinking     string `json:"thinking"`
		Signature    string `json:"signature"`
		StopReason   string `json:"stop_reason"`
		StopSequence string `json:"stop_sequence"`
	} `json:"delta"`
	Usage *struct {
		InputTokens              *int `json:"input_tokens"`
		OutputTokens             *int `json:"output_tokens"`
		CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	} `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// Next implements llm.StreamDecoder.
func (d *streamDecoder) Next() (llm.Event, error) { return d.q.Next(d.read) }

func (d *streamDecoder) push(ev llm.Event) { d.q.Push(ev) }

func (d *streamDecoder) read() error {
	sse, err := d.src.Next()
	if errors.Is(err, io.EOF) {
		return llm.Errorf(llm.ErrorUpstream, "anthropic stream ended before message_stop")
	}
	if err != nil {
		return llm.Errorf(llm.ErrorUpstream, "read anthropic stream: %v", err)
	}
	if len(sse.Data) == 0 {
		return nil
	}
	if d.started && !slowOnly && d.fastDelta(sse.Data) {
		return nil
	}
	// One value per stream, not per event: zeroed, then filled.
	d.scratch = streamEvent{}
	ev := &d.scratch
	if err := json.Unmarshal(sse.Data, ev); err != nil {
		return llm.Errorf(llm.ErrorUpstream, "decode anthropic stream event: %v", err)
	}
	if ev.Type != "message_start" && ev.Type != "error" && ev.Type != "ping" && !d.started {
		d.start(nil)
	}
	switch ev.Type {
	case "message_start":
		d.start(ev.Message)
	case "content_block_start":
		if ev.ContentBlock == nil || ev.Index < 0 || ev.Index > len(d.args) {
			return llm.Errorf(llm.ErrorUpstream, "anthropic stream: content_block_start with index %d out of order", ev.Index)
		}
		if !ev.ContentBlock.known() {
			ev.ContentBlock.raw = wire.At(sse.Data, "content_block")
		}
		part := decodeBlock(ev.ContentBlock)
		n := -1
		if part.Type == llm.PartToolCall {
			part.Arguments, n = "", 0
		}
		if ev.Index == len(d.args) {
			d.args = append(d.args, n)
		} else {
			d.args[ev.Index] = n
		}
		d.push(llm.Event{Type: llm.EventBlockStart, Index: ev.Index, Block: part})
	case "content_block_delta", "content_block_stop":
		if ev.Index < 0 || ev.Index >= len(d.args) {
			return llm.Errorf(llm.ErrorUpstream, "anthropic stream: %s for block %d, which never started", ev.Type, ev.Index)
		}
	}
	switch ev.Type {
	case "content_block_delta":
		out := llm.Event{Type: llm.EventDelta, Index: ev.Index}
		switch ev.Delta.Type {
		case "text_delta":
			out.Delta, out.Text = llm.DeltaText, ev.Delta.Text
		case "input_json_delta":
			out.Delta, out.Text = llm.DeltaArguments, ev.Delta.PartialJSON
			if d.args[ev.Index] >= 0 {
				d.args[ev.Index] += len(out.Text)
			}
		case "thinking_delta":
			out.Delta, out.Text = llm.DeltaThinking, ev.Delta.Thinking
		case "signature_delta":
			out.Delta, out.Text = llm.DeltaSignature, ev.Delta.Signature
		default: // citations and the like: no canonical place
			return nil
		}
		if out.Text != "" {
			d.push(out)
		}
	case "content_block_stop":
		if d.args[ev.Index] == 0 {
			// A tool without arguments streams none; canonical arguments are JSON.
			d.push(llm.Event{Type: llm.EventDelta, Index: ev.Index, Delta: llm.DeltaArguments, Text: "{}"})
		}
		d.push(llm.Event{Type: llm.EventBlockStop, Index: ev.Index})
	case "message_delta":
		if ev.Delta.StopReason != "" {
			d.stop = ev.Delta.StopReason
		}
		if ev.Delta.StopSequence != "" {
			d.seq = ev.Delta.StopSequence
		}
		if u := ev.Usage; u != nil {
			set(&d.usage.InputTokens, u.InputTokens)
			set(&d.usage.OutputTokens, u.OutputTokens)
			set(&d.usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
			set(&d.usage.CacheReadInputTokens, u.CacheReadInputTokens)
		}
	case "message_stop":
		d.q.Done = true
		d.push(llm.Event{Type: llm.EventEnd, StopReason: stopReason(d.stop), StopSequence: d.seq, Usage: d.usage.canonical()})
	case "error":
		d.q.Done = true
		e := &llm.Error{Kind: llm.ErrorUpstream, Message: "anthropic stream error"}
		if ev.Error != nil {
			e = Codec{}.DecodeError(0, sse.Data)
			if e.Kind == llm.ErrorInvalidRequest { // status 0 says nothing: trust the type
				e.Kind = llm.ErrorUpstream
			}
			e.Status = 0
		}
		d.push(llm.Event{Type: llm.EventError, Err: e})
	}
	return nil
}

func (d *streamDecoder) start(m *response) {
	d.started = true
	ev := llm.Event{Type: llm.EventStart}
	if m != nil {
		ev.ID, ev.Model = m.ID, m.Model
		d.usage = m.Usage
		ev.Usage = m.Usage.canonical()
	}
	d.push(ev)
}

func set(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

var errNotFast = errors.New("not the fast path's")

// slowOnly turns the fast path off, for the test that compares both.
var slowOnly = false

// fastDelta decodes the commonest event, a text, argument, thinking or
// signature delta, without reflection. It reports false, having done
// nothing, for anything else; the general decoder then takes it.
func (d *streamDecoder) fastDelta(data []byte) bool {
	var typ, dtyp, text []byte
	index := -1
	err := wire.Members(data, func(k string, v []byte) error {
		switch k {
		case "type":
			typ = v
		case "index":
			n, ok := wire.Int(v)
			if !ok {
				return errNotFast
			}
			index = n
		case "delta":
			return wire.Members(v, func(k string, v []byte) error {
				switch k {
				case "type":
					dtyp = v
				case "text", "partial_json", "thinking", "signature":
					text = v
				}
				return nil
			})
		}
		return nil
	})
	if err != nil || string(typ) != `"content_block_delta"` || index < 0 || index >= len(d.args) {
		return false
	}
	var kind llm.DeltaType
	switch string(dtyp) {
	case `"text_delta"`:
		kind = llm.DeltaText
	case `"input_json_delta"`:
		kind = llm.DeltaArguments
	case `"thinking_delta"`:
		kind = llm.DeltaThinking
	case `"signature_delta"`:
		kind = llm.DeltaSignature
	default:
		return false
	}
	t, ok := wire.Unquote(text)
	if !ok {
		return false
	}
	if kind == llm.DeltaArguments && d.args[index] >= 0 {
		d.args[index] += len(t)
	}
	if t != "" {
		d.push(llm.Event{Type: llm.EventDelta, Index: index, Delta: kind, Text: t})
	}
	return true
}
