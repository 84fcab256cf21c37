package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

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
	id      string
	model   string
	blocks  []encBlock
	ended   bool
	started bool
}

type encBlock struct {
	part llm.Part
	args strings.Builder // a call's arguments, sent whole when it ends
	sig  strings.Builder
	open bool
}

// chunk writes one streamed GenerateContentResponse whose parts are
// written by fn; finish and usage only on the last.
func (e *streamEncoder) chunk(fn func(j *wire.W), finish string, u *llm.Usage) error {
	e.j.Reset()
	e.j.Obj().KArr("candidates").Obj().KObj("content").KStr("role", "model").KArr("parts")
	fn(&e.j)
	e.j.End().End()
	if finish != "" {
		e.j.KStr("finishReason", finish)
	}
	e.j.KInt("index", 0).End().End()
	if u != nil {
		writeUsage(&e.j, *u)
	}
	e.j.KStr("modelVersion", e.model).KStrOmit("responseId", e.id).End()
	return e.sink.WriteEvent("", e.j.B)
}

// Encode implements llm.StreamEncoder.
func (e *streamEncoder) Encode(ev *llm.Event) error {
	if e.ended {
		return nil
	}
	switch ev.Type {
	case llm.EventStart:
		e.id, e.model = ev.ID, ev.Model
	case llm.EventBlockStart:
		for len(e.blocks) <= ev.Index {
			e.blocks = append(e.blocks, encBlock{})
		}
		b := &e.blocks[ev.Index]
		b.part, b.open = ev.Block, true
		b.args.Reset()
		b.sig.Reset()
		b.sig.WriteString(ev.Block.Signature)
		if b.part.Type == llm.PartOpaque && b.part.Origin == llm.FormatGemini {
			return e.chunk(func(j *wire.W) { j.Raw(b.part.Raw) }, "", nil)
		}
	case llm.EventDelta:
		if ev.Index < 0 || ev.Index >= len(e.blocks) {
			return nil
		}
		b := &e.blocks[ev.Index]
		switch ev.Delta {
		case llm.DeltaText:
			return e.chunk(func(j *wire.W) { j.Obj().KStr("text", ev.Text).End() }, "", nil)
		case llm.DeltaThinking:
			return e.chunk(func(j *wire.W) { j.Obj().KStr("text", ev.Text).KBool("thought", true).End() }, "", nil)
		case llm.DeltaArguments:
			b.args.WriteString(ev.Text)
		case llm.DeltaSignature:
			b.sig.WriteString(ev.Text)
		}
	case llm.EventBlockStop:
		return e.blockStop(ev.Index)
	case llm.EventEnd:
		for i := range e.blocks {
			if err := e.blockStop(i); err != nil {
				return err
			}
		}
		e.ended = true
		return e.chunk(func(j *wire.W) { j.Obj().KStr("text", "").End() }, finishReason(ev.StopReason), &ev.Usage)
	case llm.EventError:
		e.ended = true
		return e.sink.WriteEvent("", errorBody(ev.Err, ev.Err.HTTPStatus()))
	}
	return nil
}

// blockStop sends what waits for a block's end: a call, or a signature.
func (e *streamEncoder) blockStop(i int) error {
	if i < 0 || i >= len(e.blocks) || !e.blocks[i].open {
		return nil
	}
	b := &e.blocks[i]
	b.open = false
	p := b.part
	p.Signature = b.sig.String()
	switch {
	case p.Type == llm.PartToolCall:
		return e.chunk(func(j *wire.W) { writeOutputPart(j, &p, "", b.args.String()) }, "", nil)
	case (p.Type == llm.PartText || p.Type == llm.PartThinking) && p.Origin == llm.FormatGemini && p.Signature != "":
		return e.chunk(func(j *wire.W) { writeOutputPart(j, &p, "", "") }, "", nil)
	}
	return nil
}

// NewStreamDecoder implements llm.Codec.
func (Codec) NewStreamDecoder(src llm.SSESource) llm.StreamDecoder {
	return &streamDecoder{src: src, open: -1}
}

type streamDecoder struct {
	src      llm.SSESource
	scratch  response
	q        wire.Queue
	started  bool
	open     int // canonical index of the open text or thought block, or -1
	openType llm.PartType
	next     int
	finish   string
	usage    llm.Usage
	calls    bool
}

// Next implements llm.StreamDecoder.
func (d *streamDecoder) Next() (llm.Event, error) { return d.q.Next(d.read) }

func (d *streamDecoder) push(ev llm.Event) { d.q.Push(ev) }

func (d *streamDecoder) read() error {
	sse, err := d.src.Next()
	if errors.Is(err, io.EOF) {
		// Gemini streams have no end event: the body ends.
		if d.finish == "" {
			return llm.Errorf(llm.ErrorUpstream, "gemini stream ended before a finishReason")
		}
		d.end()
		return nil
	}
	if err != nil {
		return llm.Errorf(llm.ErrorUpstream, "read gemini stream: %v", err)
	}
	data := bytes.TrimSpace(sse.Data)
	if len(data) == 0 {
		return nil
	}
	// One value per stream, not per event: zeroed, then filled.
	d.scratch = response{}
	r := &d.scratch
	if err := json.Unmarshal(data, r); err != nil {
		return llm.Errorf(llm.ErrorUpstream, "decode gemini stream chunk: %v", err)
	}
	if r.Error != nil {
		d.q.Done = true
		e := Codec{}.DecodeError(r.Error.Code, data)
		d.push(llm.Event{Type: llm.EventError, Err: e})
		return nil
	}
	if !d.started {
		d.started = true
		d.push(llm.Event{Type: llm.EventStart, ID: r.ResponseID, Model: r.ModelVersion})
	}
	if r.UsageMetadata != nil {
		d.usage = r.UsageMetadata.canonical()
	}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			d.finish = "SAFETY"
		}
		return nil
	}
	c := &r.Candidates[0]
	parts, err := decodeParts(c.Content.Parts, func(j int) json.RawMessage {
		return wire.At(data, "candidates", 0, "content", "parts", j)
	})
	if err != nil {
		return llm.Errorf(llm.ErrorUpstream, "decode gemini stream chunk: %v", err)
	}
	for i := range parts {
		d.part(&parts[i])
	}
	if c.FinishReason != "" {
		d.finish = c.FinishReason
	}
	return nil
}

func (d *streamDecoder) part(p *llm.Part) {
	switch p.Type {
	case llm.PartText, llm.PartThinking:
		if p.Text == "" && d.open >= 0 && p.Signature != "" {
			// A signature alone belongs to the block before it.
			d.push(llm.Event{Type: llm.EventDelta, Index: d.open, Delta: llm.DeltaSignature, Text: p.Signature})
			return
		}
		if d.open < 0 || d.openType != p.Type {
			d.closeOpen()
			d.open, d.openType = d.start(llm.Part{Type: p.Type, Origin: llm.FormatGemini}), p.Type
		}
		kind := llm.DeltaText
		if p.Type == llm.PartThinking {
			kind = llm.DeltaThinking
		}
		if p.Text != "" {
			d.push(llm.Event{Type: llm.EventDelta, Index: d.open, Delta: kind, Text: p.Text})
		}
		if p.Signature != "" {
			d.push(llm.Event{Type: llm.EventDelta, Index: d.open, Delta: llm.DeltaSignature, Text: p.Signature})
		}
	case llm.PartToolCall:
		d.closeOpen()
		d.calls = true
		if p.ID == "" {
			p.ID = llm.NewID("call_")
		}
		args := p.Arguments
		p.Arguments = ""
		i := d.start(*p)
		d.push(llm.Event{Type: llm.EventDelta, Index: i, Delta: llm.DeltaArguments, Text: args})
		d.push(llm.Event{Type: llm.EventBlockStop, Index: i})
	default: // images and opaque parts: whole blocks
		d.closeOpen()
		i := d.start(*p)
		d.push(llm.Event{Type: llm.EventBlockStop, Index: i})
	}
}

func (d *streamDecoder) start(p llm.Part) int {
	i := d.next
	d.next++
	d.push(llm.Event{Type: llm.EventBlockStart, Index: i, Block: p})
	return i
}

func (d *streamDecoder) closeOpen() {
	if d.open >= 0 {
		d.push(llm.Event{Type: llm.EventBlockStop, Index: d.open})
		d.open = -1
	}
}

func (d *streamDecoder) end() {
	d.closeOpen()
	d.q.Done = true
	d.push(llm.Event{Type: llm.EventEnd, StopReason: stopReason(d.finish, d.calls), Usage: d.usage})
}
