package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

// NewStreamEncoder implements llm.Codec.
func (Codec) NewStreamEncoder(sink llm.SSESink, req *llm.Request) llm.StreamEncoder {
	e := &streamEncoder{sink: sink, usage: req == nil || req.StreamUsage}
	return e
}

type streamEncoder struct {
	sink    llm.SSESink
	usage   bool   // send a usage chunk at the end
	prefix  []byte // every chunk's start: id, object, created, model
	j       wire.W
	calls   []int // by canonical block index: tool call index, or -1
	ncalls  int
	started bool
	ended   bool
}

func (e *streamEncoder) start(id, model string) {
	e.started = true
	var j wire.W
	j.Obj().KStr("id", completionID(id)).KStr("object", "chat.completion.chunk").
		KInt("created", int(time.Now().Unix())).KStr("model", model)
	e.prefix = j.B
}

// chunk writes one chunk whose choice has the delta written by fn.
func (e *streamEncoder) chunk(finish string, fn func(j *wire.W)) error {
	e.j.Reset()
	e.j.B = append(e.j.B, e.prefix...)
	e.j.B = append(e.j.B, `,"choices":[{"index":0,"delta":`...)
	e.j.Obj()
	fn(&e.j)
	e.j.End()
	if finish == "" {
		e.j.B = append(e.j.B, `,"finish_reason":null}]}`...)
	} else {
		e.j.B = append(e.j.B, `,"finish_reason":"`...)
		e.j.B = append(e.j.B, finish...)
		e.j.B = append(e.j.B, `"}]}`...)
	}
	return e.sink.WriteEvent("", e.j.B)
}

// Encode implements llm.StreamEncoder.
func (e *streamEncoder) Encode(ev *llm.Event) error {
	if e.ended {
		return nil
	}
	if !e.started && ev.Type != llm.EventError {
		if ev.Type == llm.EventStart {
			e.start(ev.ID, ev.Model)
		} else {
			e.start("", "")
		}
		if err := e.chunk("", func(j *wire.W) { j.KStr("role", "assistant").KStr("content", "") }); err != nil {
			return err
		}
		if ev.Type == llm.EventStart {
			return nil
		}
	}
	switch ev.Type {
	case llm.EventBlockStart:
		for len(e.calls) <= ev.Index {
			e.calls = append(e.calls, -1)
		}
		if ev.Block.Type != llm.PartToolCall {
			return nil
		}
		k := e.ncalls
		e.ncalls++
		e.calls[ev.Index] = k
		p := &ev.Block
		return e.chunk("", func(j *wire.W) {
			j.KArr("tool_calls")
			writeToolCall(j, k, p.ID, llm.QualifiedName(p.Namespace, p.Name), "")
			j.End()
		})
	case llm.EventDelta:
		switch ev.Delta {
		case llm.DeltaText:
			return e.chunk("", func(j *wire.W) { j.KStr("content", ev.Text) })
		case llm.DeltaThinking:
			return e.chunk("", func(j *wire.W) { j.KStr("reasoning_content", ev.Text) })
		case llm.DeltaArguments:
			if ev.Index < 0 || ev.Index >= len(e.calls) || e.calls[ev.Index] < 0 {
				return nil
			}
			k := e.calls[ev.Index]
			return e.chunk("", func(j *wire.W) {
				j.KArr("tool_calls").Obj().KInt("index", k).KObj("function").KStr("arguments", ev.Text).End().End().End()
			})
		}
	case llm.EventEnd:
		e.ended = true
		if err := e.chunk(finishReason(ev.StopReason), func(*wire.W) {}); err != nil {
			return err
		}
		if e.usage {
			e.j.Reset()
			e.j.B = append(e.j.B, e.prefix...)
			e.j.B = append(e.j.B, `,"choices":[]`...)
			e.j.B = append(e.j.B, ',')
			writeUsage(&e.j, ev.Usage)
			e.j.B = append(e.j.B, '}')
			if err := e.sink.WriteEvent("", e.j.B); err != nil {
				return err
			}
		}
		return e.sink.WriteEvent("", []byte("[DONE]"))
	case llm.EventError:
		e.ended = true
		return e.sink.WriteEvent("", ErrorBody(ev.Err))
	}
	return nil
}

// NewStreamDecoder implements llm.Codec.
func (Codec) NewStreamDecoder(src llm.SSESource) llm.StreamDecoder {
	return &streamDecoder{src: src, open: -1}
}

type streamDecoder struct {
	src      llm.SSESource
	q        wire.Queue
	started  bool
	open     int // the canonical index of the open text or thinking block, or -1
	openType llm.PartType
	blocks   []blockState
	calls    map[int]int // tool call index → canonical block index
	finish   string
	usage    llm.Usage
	sawCalls bool
}

type blockState struct {
	call bool
	open bool
	args int
}

type chunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string     `json:"content"`
			ReasoningContent string     `json:"reasoning_content"`
			Reasoning        string     `json:"reasoning"`
			Refusal          string     `json:"refusal"`
			ToolCalls        []toolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage       `json:"usage"`
	Error *errorObject `json:"error"`
}

// Next implements llm.StreamDecoder.
func (d *streamDecoder) Next() (llm.Event, error) { return d.q.Next(d.read) }

func (d *streamDecoder) push(ev llm.Event) { d.q.Push(ev) }

var done = []byte("[DONE]")

func (d *streamDecoder) read() error {
	sse, err := d.src.Next()
	if errors.Is(err, io.EOF) {
		if d.finish == "" {
			return llm.Errorf(llm.ErrorUpstream, "chat completions stream ended before its finish_reason")
		}
		d.end() // some servers end without [DONE]
		return nil
	}
	if err != nil {
		return llm.Errorf(llm.ErrorUpstream, "read chat completions stream: %v", err)
	}
	data := bytes.TrimSpace(sse.Data)
	if len(data) == 0 {
		return nil
	}
	if bytes.Equal(data, done) {
		d.end()
		return nil
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return llm.Errorf(llm.ErrorUpstream, "decode chat completions chunk: %v", err)
	}
	if c.Error != nil {
		d.q.Done = true
		e := DecodeErrorBody(502, data)
		e.Status = 0
		if e.Kind == llm.ErrorInternal {
			e.Kind = llm.ErrorUpstream
		}
		d.push(llm.Event{Type: llm.EventError, Err: e})
		return nil
	}
	if !d.started {
		d.started = true
		d.push(llm.Event{Type: llm.EventStart, ID: c.ID, Model: c.Model})
	}
	if c.Usage != nil {
		d.usage = c.Usage.canonical()
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // one choice is all the canonical model has
		}
		dl := &ch.Delta
		reasoning := dl.ReasoningContent
		if reasoning == "" {
			reasoning = dl.Reasoning
		}
		if reasoning != "" {
			d.text(llm.PartThinking, llm.DeltaThinking, reasoning)
		}
		if dl.Content != "" {
			d.text(llm.PartText, llm.DeltaText, dl.Content)
		}
		if dl.Refusal != "" {
			d.text(llm.PartText, llm.DeltaText, dl.Refusal)
		}
		for k := range dl.ToolCalls {
			d.toolCall(&dl.ToolCalls[k], k)
		}
		if ch.FinishReason != "" {
			d.finish = ch.FinishReason
			d.closeAll()
		}
	}
	return nil
}

// text appends to the open block of type t, first closing any other.
func (d *streamDecoder) text(t llm.PartType, kind llm.DeltaType, s string) {
	if d.open < 0 || d.openType != t {
		d.closeOpen()
		d.open, d.openType = d.newBlock(llm.Part{Type: t, Origin: origin(t)}, false), t
	}
	d.push(llm.Event{Type: llm.EventDelta, Index: d.open, Delta: kind, Text: s})
}

func origin(t llm.PartType) llm.Format {
	if t == llm.PartThinking {
		return llm.FormatOpenAI
	}
	return ""
}

func (d *streamDecoder) newBlock(p llm.Part, call bool) int {
	i := len(d.blocks)
	d.blocks = append(d.blocks, blockState{call: call, open: true})
	d.push(llm.Event{Type: llm.EventBlockStart, Index: i, Block: p})
	return i
}

func (d *streamDecoder) closeOpen() {
	if d.open >= 0 {
		d.stop(d.open)
		d.open = -1
	}
}

func (d *streamDecoder) stop(i int) {
	b := &d.blocks[i]
	if !b.open {
		return
	}
	b.open = false
	if b.call && b.args == 0 {
		d.push(llm.Event{Type: llm.EventDelta, Index: i, Delta: llm.DeltaArguments, Text: "{}"})
	}
	d.push(llm.Event{Type: llm.EventBlockStop, Index: i})
}

func (d *streamDecoder) toolCall(tc *toolCall, pos int) {
	k := pos
	if tc.Index != nil {
		k = *tc.Index
	}
	if d.calls == nil {
		d.calls = map[int]int{}
	}
	i, seen := d.calls[k]
	if !seen {
		// A new call: the block before it is complete.
		d.closeOpen()
		for _, j := range d.calls {
			d.stop(j)
		}
		id := tc.ID
		if id == "" {
			id = llm.NewID("call_")
		}
		i = d.newBlock(llm.Part{Type: llm.PartToolCall, ID: id, Name: tc.Function.Name}, true)
		d.calls[k] = i
		d.sawCalls = true
	}
	if a := tc.Function.Arguments; a != "" {
		d.blocks[i].args += len(a)
		d.push(llm.Event{Type: llm.EventDelta, Index: i, Delta: llm.DeltaArguments, Text: a})
	}
}

func (d *streamDecoder) closeAll() {
	d.closeOpen()
	for i := range d.blocks {
		d.stop(i)
	}
}

func (d *streamDecoder) end() {
	if !d.started {
		d.push(llm.Event{Type: llm.EventStart})
		d.started = true
	}
	d.closeAll()
	d.q.Done = true
	reason := stopReason(d.finish)
	if reason == "" || (reason == llm.StopEndTurn && d.sawCalls) {
		reason = llm.StopEndTurn
		if d.sawCalls {
			reason = llm.StopToolUse
		}
	}
	d.push(llm.Event{Type: llm.EventEnd, StopReason: reason, Usage: d.usage})
}
