package responses

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
	return &streamEncoder{sink: sink, ns: namespaces(req), msg: -1}
}

type streamEncoder struct {
	sink    llm.SSESink
	ns      map[string][2]string
	j       wire.W
	seq     int
	id      string
	model   string
	started bool
	ended   bool
	items   []outItem  // the output so far, by output index
	blocks  []blockRef // by canonical index
	msg     int        // output index of the open message item, or -1
}

type outItem struct {
	id    string
	part  llm.Part // function_call or reasoning: its part; text parts of a message in texts
	texts []*strings.Builder
	args  strings.Builder
	done  bool
	raw   json.RawMessage
}

type blockRef struct {
	item    int // output index, -1 when the block is not shown
	content int // content index in a message item
	open    bool
}

// event starts an event of type typ: the caller adds members, then emit.
func (e *streamEncoder) event(typ string) *wire.W {
	e.j.Reset()
	e.j.Obj().KStr("type", typ).KInt("sequence_number", e.seq)
	e.seq++
	return &e.j
}

func (e *streamEncoder) emit() error {
	e.j.End()
	// The type is the first member: its value is the event name.
	name := e.j.B[len(`{"type":"`):]
	name = name[:indexByte(name, '"')]
	return e.sink.WriteEvent(string(name), e.j.B)
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return len(b)
}

// Encode implements llm.StreamEncoder.
func (e *streamEncoder) Encode(ev *llm.Event) error {
	if e.ended {
		return nil
	}
	if !e.started && ev.Type != llm.EventError {
		e.started = true
		if ev.Type == llm.EventStart {
			e.id, e.model = ev.ID, ev.Model
		}
		e.id = responseID(e.id)
		for _, typ := range []string{"response.created", "response.in_progress"} {
			j := e.event(typ)
			j.Key("response")
			writeResponse(j, e.id, e.model, "", nil, nil)
			if err := e.emit(); err != nil {
				return err
			}
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
		if err := e.closeMessage(); err != nil {
			return err
		}
		e.ended = true
		typ := "response.completed"
		if st, _ := status(ev.StopReason); st == "incomplete" {
			typ = "response.incomplete"
		}
		j := e.event(typ)
		j.Key("response")
		writeResponse(j, e.id, e.model, ev.StopReason, e.writeOutput, &ev.Usage)
		return e.emit()
	case llm.EventError:
		e.ended = true
		j := e.event("response.failed")
		j.KObj("response").KStr("id", responseID(e.id)).KStr("object", "response").KStr("status", "failed").
			KObj("error").KStr("code", errorCode(ev.Err)).KStr("message", ev.Err.Message).End().
			KStr("model", e.model).KArr("output").End().End()
		return e.emit()
	}
	return nil
}

func errorCode(err *llm.Error) string {
	switch err.Kind {
	case llm.ErrorRateLimit:
		return "rate_limit_exceeded"
	case llm.ErrorInvalidRequest:
		return "invalid_prompt"
	}
	return "server_error"
}

func (e *streamEncoder) writeOutput(j *wire.W) {
	for i := range e.items {
		e.writeItem(j, i)
	}
}

func (e *streamEncoder) writeItem(j *wire.W, i int) {
	it := &e.items[i]
	switch {
	case it.raw != nil:
		j.Raw(it.raw)
	case it.part.Type == llm.PartToolCall:
		writeCallItem(j, it.id, &it.part, e.ns, it.args.String())
	case it.part.Type == llm.PartThinking:
		p := it.part
		p.ID, p.Text, p.Signature = it.id, it.args.String(), it.part.Signature
		writeReasoning(j, &p)
	default:
		j.Obj().KStr("id", it.id).KStr("type", "message").KStr("status", status2(it.done)).KStr("role", "assistant").KArr("content")
		for _, t := range it.texts {
			writeTextPart(j, t.String())
		}
		j.End().End()
	}
}

func status2(done bool) string {
	if done {
		return "completed"
	}
	return "in_progress"
}

func (e *streamEncoder) addItem(it outItem) (int, error) {
	e.items = append(e.items, it)
	oi := len(e.items) - 1
	j := e.event("response.output_item.added")
	j.KInt("output_index", oi).Key("item")
	switch {
	case it.raw != nil:
		j.Raw(it.raw)
	case it.part.Type == llm.PartToolCall:
		namespace, name := callName(&it.part, e.ns)
		j.Obj().KStr("id", it.id).KStr("type", "function_call").KStr("status", "in_progress").KStr("call_id", it.part.ID).
			KStr("name", name).KStrOmit("namespace", namespace).KStr("arguments", "").End()
	case it.part.Type == llm.PartThinking:
		j.Obj().KStr("id", it.id).KStr("type", "reasoning").KArr("summary").End().End()
	default:
		j.Obj().KStr("id", it.id).KStr("type", "message").KStr("status", "in_progress").KStr("role", "assistant").
			KArr("content").End().End()
	}
	return oi, e.emit()
}

func (e *streamEncoder) itemDone(oi int) error {
	e.items[oi].done = true
	j := e.event("response.output_item.done")
	j.KInt("output_index", oi).Key("item")
	e.writeItem(j, oi)
	return e.emit()
}

func (e *streamEncoder) closeMessage() error {
	if e.msg < 0 {
		return nil
	}
	oi := e.msg
	e.msg = -1
	return e.itemDone(oi)
}

func (e *streamEncoder) blockStart(ev *llm.Event) error {
	for len(e.blocks) <= ev.Index {
		e.blocks = append(e.blocks, blockRef{item: -1})
	}
	b := &e.blocks[ev.Index]
	p := ev.Block
	if p.Type != llm.PartText {
		if err := e.closeMessage(); err != nil {
			return err
		}
	}
	switch p.Type {
	case llm.PartText:
		if e.msg < 0 {
			oi, err := e.addItem(outItem{id: llm.NewID("msg_")})
			if err != nil {
				return err
			}
			e.msg = oi
		}
		it := &e.items[e.msg]
		it.texts = append(it.texts, &strings.Builder{})
		*b = blockRef{item: e.msg, content: len(it.texts) - 1, open: true}
		j := e.event("response.content_part.added")
		j.KStr("item_id", it.id).KInt("output_index", e.msg).KInt("content_index", b.content).Key("part")
		writeTextPart(j, "")
		return e.emit()
	case llm.PartToolCall:
		oi, err := e.addItem(outItem{id: "fc_" + p.ID, part: p})
		*b = blockRef{item: oi, open: true}
		return err
	case llm.PartThinking:
		if p.Origin != llm.FormatResponses {
			p.Signature = ""
		}
		oi, err := e.addItem(outItem{id: reasoningID(p.ID), part: p})
		if err != nil {
			return err
		}
		*b = blockRef{item: oi, open: true}
		it := &e.items[oi]
		j := e.event("response.reasoning_summary_part.added")
		j.KStr("item_id", it.id).KInt("output_index", oi).KInt("summary_index", 0).
			KObj("part").KStr("type", "summary_text").KStr("text", "").End()
		return e.emit()
	case llm.PartOpaque:
		if p.Origin != llm.FormatResponses {
			return nil
		}
		oi, err := e.addItem(outItem{raw: p.Raw})
		*b = blockRef{item: oi, open: true}
		return err
	}
	return nil
}

func (e *streamEncoder) delta(ev *llm.Event) error {
	if ev.Index < 0 || ev.Index >= len(e.blocks) || e.blocks[ev.Index].item < 0 {
		return nil
	}
	b := &e.blocks[ev.Index]
	it := &e.items[b.item]
	switch {
	case ev.Delta == llm.DeltaText && it.part.Type == 0 && it.raw == nil:
		it.texts[b.content].WriteString(ev.Text)
		j := e.event("response.output_text.delta")
		j.KStr("item_id", it.id).KInt("output_index", b.item).KInt("content_index", b.content).KStr("delta", ev.Text).
			KArr("logprobs").End()
		return e.emit()
	case ev.Delta == llm.DeltaArguments && it.part.Type == llm.PartToolCall:
		it.args.WriteString(ev.Text)
		j := e.event("response.function_call_arguments.delta")
		j.KStr("item_id", it.id).KInt("output_index", b.item).KStr("delta", ev.Text)
		return e.emit()
	case ev.Delta == llm.DeltaThinking && it.part.Type == llm.PartThinking:
		it.args.WriteString(ev.Text)
		j := e.event("response.reasoning_summary_text.delta")
		j.KStr("item_id", it.id).KInt("output_index", b.item).KInt("summary_index", 0).KStr("delta", ev.Text)
		return e.emit()
	case ev.Delta == llm.DeltaSignature && it.part.Type == llm.PartThinking && it.part.Origin == llm.FormatResponses:
		it.part.Signature += ev.Text
	}
	return nil
}

func (e *streamEncoder) blockStop(i int) error {
	if i < 0 || i >= len(e.blocks) || !e.blocks[i].open || e.blocks[i].item < 0 {
		return nil
	}
	b := &e.blocks[i]
	b.open = false
	it := &e.items[b.item]
	switch {
	case it.raw != nil:
		return e.itemDone(b.item)
	case it.part.Type == llm.PartToolCall:
		if it.args.Len() == 0 {
			it.args.WriteString("{}")
		}
		j := e.event("response.function_call_arguments.done")
		j.KStr("item_id", it.id).KInt("output_index", b.item).KStr("arguments", it.args.String())
		if err := e.emit(); err != nil {
			return err
		}
		return e.itemDone(b.item)
	case it.part.Type == llm.PartThinking:
		text := it.args.String()
		j := e.event("response.reasoning_summary_text.done")
		j.KStr("item_id", it.id).KInt("output_index", b.item).KInt("summary_index", 0).KStr("text", text)
		if err := e.emit(); err != nil {
			return err
		}
		j = e.event("response.reasoning_summary_part.done")
		j.KStr("item_id", it.id).KInt("output_index", b.item).KInt("summary_index", 0).
			KObj("part").KStr("type", "summary_text").KStr("text", text).End()
		if err := e.emit(); err != nil {
			return err
		}
		return e.itemDone(b.item)
	default:
		text := it.texts[b.content].String()
		j := e.event("response.output_text.done")
		j.KStr("item_id", it.id).KInt("output_index", b.item).KInt("content_index", b.content).KStr("text", text).
			KArr("logprobs").End()
		if err := e.emit(); err != nil {
			return err
		}
		j = e.event("response.content_part.done")
		j.KStr("item_id", it.id).KInt("output_index", b.item).KInt("content_index", b.content).Key("part")
		writeTextPart(j, text)
		return e.emit()
	}
}

// NewStreamDecoder implements llm.Codec.
func (Codec) NewStreamDecoder(src llm.SSESource) llm.StreamDecoder {
	return &streamDecoder{src: src, blocks: map[[2]int]*decBlock{}}
}

type streamDecoder struct {
	src     llm.SSESource
	scratch streamEvent
	q       wire.Queue
	started bool
	next    int
	blocks  map[[2]int]*decBlock // by output index and content (or summary) index
	order   []*decBlock          // the same, in the order they started
	calls   bool
}

type decBlock struct {
	index int
	n     int // bytes of deltas seen
	open  bool
}

type streamEvent struct {
	Type         string          `json:"type"`
	Response     *response       `json:"response"`
	OutputIndex  int             `json:"output_index"`
	ContentIndex int             `json:"content_index"`
	SummaryIndex int             `json:"summary_index"`
	Item         json.RawMessage `json:"item"`
	Part         *part           `json:"part"`
	Delta        string          `json:"delta"`
	Arguments    string          `json:"arguments"`
	Code         string          `json:"code"`
	Message      string          `json:"message"`
}

// Next implements llm.StreamDecoder.
func (d *streamDecoder) Next() (llm.Event, error) { return d.q.Next(d.read) }

func (d *streamDecoder) push(ev llm.Event) { d.q.Push(ev) }

func (d *streamDecoder) start(r *response) {
	if d.started {
		return
	}
	d.started = true
	ev := llm.Event{Type: llm.EventStart}
	if r != nil {
		ev.ID, ev.Model = r.ID, r.Model
	}
	d.push(ev)
}

func (d *streamDecoder) open(key [2]int, p llm.Part) *decBlock {
	b := &decBlock{index: d.next, open: true}
	d.next++
	d.blocks[key] = b
	d.order = append(d.order, b)
	d.push(llm.Event{Type: llm.EventBlockStart, Index: b.index, Block: p})
	return b
}

func (d *streamDecoder) delta(key [2]int, kind llm.DeltaType, text string) {
	if b := d.blocks[key]; b != nil && text != "" {
		b.n += len(text)
		d.push(llm.Event{Type: llm.EventDelta, Index: b.index, Delta: kind, Text: text})
	}
}

func (d *streamDecoder) close(key [2]int) {
	if b := d.blocks[key]; b != nil && b.open {
		b.open = false
		d.push(llm.Event{Type: llm.EventBlockStop, Index: b.index})
	}
}

// reasoningKey is where a reasoning item's one thinking block is kept: its
// summary parts are joined into it.
func reasoningKey(oi int) [2]int { return [2]int{oi, -1} }

func (d *streamDecoder) read() error {
	sse, err := d.src.Next()
	if errors.Is(err, io.EOF) {
		return llm.Errorf(llm.ErrorUpstream, "responses stream ended before response.completed")
	}
	if err != nil {
		return llm.Errorf(llm.ErrorUpstream, "read responses stream: %v", err)
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
		return llm.Errorf(llm.ErrorUpstream, "decode responses stream event: %v", err)
	}
	if ev.Type != "error" && ev.Type != "response.failed" {
		d.start(ev.Response)
	}
	oi := ev.OutputIndex
	switch ev.Type {
	case "response.output_item.added":
		it, err := decodeItem(ev.Item)
		if err != nil {
			return err
		}
		switch it.Type {
		case "function_call":
			d.calls = true
			d.open([2]int{oi, 0}, llm.Part{Type: llm.PartToolCall, ID: it.CallID, Name: it.Name, Namespace: it.Namespace})
		case "reasoning":
			d.open(reasoningKey(oi), llm.Part{Type: llm.PartThinking, ID: it.ID, Origin: llm.FormatResponses})
		}
	case "response.content_part.added":
		if ev.Part != nil && (ev.Part.Type == "output_text" || ev.Part.Type == "refusal") {
			d.open([2]int{oi, ev.ContentIndex + 1}, llm.Part{Type: llm.PartText})
		}
	case "response.output_text.delta", "response.refusal.delta":
		d.delta([2]int{oi, ev.ContentIndex + 1}, llm.DeltaText, ev.Delta)
	case "response.content_part.done":
		d.close([2]int{oi, ev.ContentIndex + 1})
	case "response.function_call_arguments.delta":
		d.delta([2]int{oi, 0}, llm.DeltaArguments, ev.Delta)
	case "response.function_call_arguments.done":
		if b := d.blocks[[2]int{oi, 0}]; b != nil && b.n == 0 {
			d.delta([2]int{oi, 0}, llm.DeltaArguments, ev.Arguments)
		}
	case "response.reasoning_summary_part.added":
		if ev.SummaryIndex > 0 {
			d.delta(reasoningKey(oi), llm.DeltaThinking, "\n\n")
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		d.delta(reasoningKey(oi), llm.DeltaThinking, ev.Delta)
	case "response.output_item.done":
		return d.itemDone(oi, ev.Item)
	case "response.completed", "response.incomplete":
		d.q.Done = true
		for _, b := range d.order {
			if b.open {
				b.open = false
				d.push(llm.Event{Type: llm.EventBlockStop, Index: b.index})
			}
		}
		end := llm.Event{Type: llm.EventEnd, StopReason: llm.StopEndTurn}
		if r := ev.Response; r != nil {
			incomplete := ""
			if r.IncompleteDetails != nil {
				incomplete = r.IncompleteDetails.Reason
			}
			end.StopReason = stopReason(r.Status, incomplete, d.calls)
			end.Usage = r.Usage.canonical()
		}
		d.push(end)
	case "response.failed":
		d.q.Done = true
		var e *llm.Error
		if ev.Response != nil {
			e = failure(ev.Response.Error)
		} else {
			e = failure(nil)
		}
		d.push(llm.Event{Type: llm.EventError, Err: e})
	case "error":
		d.q.Done = true
		d.push(llm.Event{Type: llm.EventError, Err: failure(&apiError{ev.Code, ev.Message})})
	}
	return nil
}

func decodeItem(raw json.RawMessage) (*item, error) {
	var it item
	if err := json.Unmarshal(raw, &it); err != nil {
		return nil, llm.Errorf(llm.ErrorUpstream, "decode responses output item: %v", err)
	}
	it.classify(func() json.RawMessage { return bytes.Clone(raw) })
	return &it, nil
}

func (d *streamDecoder) itemDone(oi int, raw json.RawMessage) error {
	it, err := decodeItem(raw)
	if err != nil {
		return err
	}
	switch it.Type {
	case "function_call":
		key := [2]int{oi, 0}
		if b := d.blocks[key]; b != nil && b.n == 0 {
			args := it.Arguments
			if args == "" {
				args = "{}"
			}
			d.delta(key, llm.DeltaArguments, args)
		}
		d.close(key)
	case "reasoning":
		key := reasoningKey(oi)
		if d.blocks[key] == nil {
			d.open(key, llm.Part{Type: llm.PartThinking, ID: it.ID, Origin: llm.FormatResponses})
		}
		if b := d.blocks[key]; b.n == 0 {
			d.delta(key, llm.DeltaThinking, reasoningPart(it).Text)
		}
		d.delta(key, llm.DeltaSignature, it.EncryptedContent)
		d.close(key)
	case "message":
		for k := range len(it.Content) + 1 {
			d.close([2]int{oi, k})
		}
	default:
		if it.raw != nil {
			b := d.open([2]int{oi, 0}, llm.Part{Type: llm.PartOpaque, Raw: it.raw, Origin: llm.FormatResponses})
			b.open = false
			d.push(llm.Event{Type: llm.EventBlockStop, Index: b.index})
		}
	}
	return nil
}

var errNotFast = errors.New("not the fast path's")

// slowOnly turns the fast path off, for the test that compares both.
var slowOnly = false

// fastDelta decodes the commonest events, text, argument and reasoning
// deltas, without reflection. It reports false, having done nothing, for
// anything else; the general decoder then takes it.
func (d *streamDecoder) fastDelta(data []byte) bool {
	var typ, delta []byte
	oi, ci := -1, 0
	err := wire.Members(data, func(k string, v []byte) error {
		var ok bool
		switch k {
		case "type":
			typ = v
		case "delta":
			delta = v
		case "output_index":
			if oi, ok = wire.Int(v); !ok {
				return errNotFast
			}
		case "content_index":
			if ci, ok = wire.Int(v); !ok {
				return errNotFast
			}
		}
		return nil
	})
	if err != nil || oi < 0 || delta == nil {
		return false
	}
	var key [2]int
	var kind llm.DeltaType
	switch string(typ) {
	case `"response.output_text.delta"`, `"response.refusal.delta"`:
		key, kind = [2]int{oi, ci + 1}, llm.DeltaText
	case `"response.function_call_arguments.delta"`:
		key, kind = [2]int{oi, 0}, llm.DeltaArguments
	case `"response.reasoning_summary_text.delta"`, `"response.reasoning_text.delta"`:
		key, kind = reasoningKey(oi), llm.DeltaThinking
	default:
		return false
	}
	t, ok := wire.Unquote(delta)
	if !ok {
		return false
	}
	d.delta(key, kind, t)
	return true
}
