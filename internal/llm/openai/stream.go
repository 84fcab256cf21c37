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
	scratch  chunk
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
	if d.started && !slowOnly && d.fastChunk(data) {
		return nil
	}
	// One value per stream, not per event: zeroed, then filled.
	d.scratch = chunk{}
	c := &d.scratch
	if err := json.Unmarshal(data, c); err != nil {
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

var errNotFast = errors.New("not the fast path's")

// slowOnly turns the fast path off, for the test that compares both.
var slowOnly = false

// fastChunk decodes the commonest chunks, a piece of text, of reasoning or
// of a known call's arguments, without reflection. It reports false,
// having done nothing, for anything else (first chunks, new calls, finish
// reasons, usage, errors); the general decoder then takes it.
func (d *streamDecoder) fastChunk(data []byte) bool {
	var choices []byte
	err := wire.Members(data, func(k string, v []byte) error {
		switch k {
		case "choices":
			choices = v
		case "usage", "error":
			if string(v) != "null" {
				return errNotFast
			}
		}
		return nil
	})
	if err != nil || choices == nil {
		return false
	}
	var choice []byte
	n := 0
	if wire.Elements(choices, func(_ int, v []byte) error { n, choice = n+1, v; return nil }) != nil || n != 1 {
		return false
	}
	var delta []byte
	err = wire.Members(choice, func(k string, v []byte) error {
		switch k {
		case "index":
			if string(v) != "0" {
				return errNotFast
			}
		case "finish_reason":
			if string(v) != "null" {
				return errNotFast
			}
		case "delta":
			delta = v
		}
		return nil
	})
	if err != nil || delta == nil {
		return false
	}
	var content, reasoning, calls []byte
	err = wire.Members(delta, func(k string, v []byte) error {
		switch k {
		case "content":
			content = v
		case "reasoning_content", "reasoning":
			if reasoning == nil || string(reasoning) == "null" || string(reasoning) == `""` {
				reasoning = v
			}
		case "tool_calls":
			calls = v
		case "refusal", "function_call":
			if string(v) != "null" {
				return errNotFast
			}
		}
		return nil
	})
	if err != nil {
		return false
	}
	text := func(v []byte) (string, bool) {
		if v == nil || string(v) == "null" {
			return "", true
		}
		return wire.Unquote(v)
	}
	r, ok1 := text(reasoning)
	c, ok2 := text(content)
	call, args, ok3 := -1, "", true
	if calls != nil && string(calls) != "null" {
		call, args, ok3 = d.argumentsPiece(calls)
	}
	if !ok1 || !ok2 || !ok3 {
		return false
	}
	if r != "" {
		d.text(llm.PartThinking, llm.DeltaThinking, r)
	}
	if c != "" {
		d.text(llm.PartText, llm.DeltaText, c)
	}
	if call >= 0 && args != "" {
		d.blocks[call].args += len(args)
		d.push(llm.Event{Type: llm.EventDelta, Index: call, Delta: llm.DeltaArguments, Text: args})
	}
	return true
}

// argumentsPiece reads tool_calls holding one piece of arguments of a call
// already started: [{"index":k,"function":{"arguments":"…"}}].
func (d *streamDecoder) argumentsPiece(calls []byte) (block int, args string, ok bool) {
	var call []byte
	n := 0
	if wire.Elements(calls, func(_ int, v []byte) error { n, call = n+1, v; return nil }) != nil || n != 1 {
		return 0, "", false
	}
	k, raw := -1, []byte(nil)
	err := wire.Members(call, func(key string, v []byte) error {
		switch key {
		case "index":
			var ok bool
			if k, ok = wire.Int(v); !ok {
				return errNotFast
			}
		case "function":
			return wire.Members(v, func(key string, v []byte) error {
				switch key {
				case "arguments":
					raw = v
				case "name":
					if string(v) != "null" && string(v) != `""` {
						return errNotFast
					}
				}
				return nil
			})
		case "id", "type":
			if string(v) != "null" && string(v) != `""` {
				return errNotFast // a new call: the general decoder starts it
			}
		}
		return nil
	})
	i, seen := d.calls[k]
	if err != nil || !seen || raw == nil {
		return 0, "", false
	}
	args, ok = wire.Unquote(raw)
	return i, args, ok
}
