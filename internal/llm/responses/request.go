package responses

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
	"github.com/agent2env/agent2env/internal/llm/openai"
)

type request struct {
	Model             string          `json:"model"`
	Instructions      string          `json:"instructions"`
	Input             items           `json:"input"`
	Tools             []tool          `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	MaxOutputTokens   int             `json:"max_output_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	Stream            bool            `json:"stream"`
	Reasoning         *struct {
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
	} `json:"reasoning"`
	User string `json:"user"`
}

var knownRequest = map[string]bool{
	"model": true, "instructions": true, "input": true, "tools": true, "tool_choice": true,
	"parallel_tool_calls": true, "max_output_tokens": true, "temperature": true, "top_p": true,
	"stream": true, "reasoning": true, "user": true,
}

// items is the input: a string (one user message) or a list of items.
type items []item

func (it *items) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*it = items{{Type: "message", Role: "user", Content: parts{{Type: "input_text", Text: s}}}}
		return nil
	}
	// Items are plain structs; those the model has no place for are taken
	// raw afterwards.
	if err := json.Unmarshal(data, (*[]item)(it)); err != nil {
		return err
	}
	for i := range *it {
		(*it)[i].classify(func() json.RawMessage { return wire.At(data, i) })
	}
	return nil
}

type item struct {
	Type             string `json:"type"`
	ID               string `json:"id"`
	Role             string `json:"role"`
	Content          parts  `json:"content"`
	CallID           string `json:"call_id"`
	Name             string `json:"name"`
	Namespace        string `json:"namespace"`
	Arguments        string `json:"arguments"`
	Output           parts  `json:"output"`
	Summary          parts  `json:"summary"`
	EncryptedContent string `json:"encrypted_content"`
	Status           string `json:"status"`
	raw              json.RawMessage
}

// classify completes a decoded item: a role alone makes a message, and
// items of other types (custom tool calls, web searches, references…) are
// kept raw.
func (it *item) classify(raw func() json.RawMessage) {
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	switch it.Type {
	case "message", "function_call", "function_call_output", "reasoning":
	default:
		it.raw = raw()
	}
}

// parts is message content or a function call's output: a string (one
// text part) or a list of parts.
type parts []part

func (ps *parts) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*ps = parts{{Type: "input_text", Text: s}}
		return nil
	}
	if string(data) == "null" {
		*ps = nil
		return nil
	}
	if err := json.Unmarshal(data, (*[]part)(ps)); err != nil {
		return err
	}
	for i := range *ps {
		p := &(*ps)[i]
		switch p.Type {
		case "input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text":
		case "input_image":
			if p.ImageURL == "" {
				p.raw = wire.At(data, i) // a file id
			}
		default:
			p.raw = wire.At(data, i)
		}
	}
	return nil
}

type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	raw      json.RawMessage
}

type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Tools       []tool          `json:"tools"`
}

// known reports whether the model has a place for t: functions, and
// namespaces of functions only.
func (t *tool) known() bool {
	switch t.Type {
	case "function":
		return true
	case "namespace":
		for _, sub := range t.Tools {
			if sub.Type != "function" {
				return false
			}
		}
		return true
	}
	return false
}

// DecodeRequest implements llm.Codec.
func (Codec) DecodeRequest(body []byte) (*llm.Request, error) {
	var r request
	if err := llm.DecodeRequestJSON(body, &r, "responses"); err != nil {
		return nil, err
	}
	req := &llm.Request{
		Model: r.Model, MaxTokens: r.MaxOutputTokens, Temperature: r.Temperature, TopP: r.TopP,
		ParallelToolCalls: r.ParallelToolCalls, Stream: r.Stream, StreamUsage: true, User: r.User,
	}
	if r.Instructions != "" {
		req.System = []llm.Part{llm.Text(r.Instructions)}
	}
	if rs := r.Reasoning; rs != nil {
		req.Reasoning = &llm.Reasoning{Effort: rs.Effort, Summary: rs.Summary}
		if rs.Effort == "none" {
			req.Reasoning = &llm.Reasoning{Disabled: true, Summary: rs.Summary}
		}
	}
	if err := decodeItems(req, r.Input); err != nil {
		return nil, err
	}
	for i, t := range r.Tools {
		switch {
		case !t.known():
			req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Raw: wire.At(body, "tools", i), Origin: llm.FormatResponses})
		case t.Type == "namespace":
			for _, sub := range t.Tools {
				req.Tools = append(req.Tools, llm.Tool{Name: sub.Name, Namespace: t.Name, Description: sub.Description, Parameters: sub.Parameters})
			}
		default:
			req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	tc, err := openai.DecodeToolChoice(r.ToolChoice, "responses request")
	if err != nil {
		return nil, err
	}
	req.ToolChoice = tc
	extra, err := wire.Extra(llm.FormatResponses, body, func(k string) bool { return knownRequest[k] })
	if err != nil {
		return nil, llm.Invalid("decode responses request: %v", err)
	}
	req.Extra = extra
	return req, nil
}

func decodeItems(req *llm.Request, its items) error {
	// add appends parts to the last message if it has role r (and, for
	// tool results, holds only results), else starts a message.
	add := func(r llm.Role, results bool, ps ...llm.Part) {
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == r && (!results || onlyResults(req.Messages[n-1])) {
			req.Messages[n-1].Parts = append(req.Messages[n-1].Parts, ps...)
			return
		}
		req.Messages = append(req.Messages, llm.Message{Role: r, Parts: ps})
	}
	for i := range its {
		it := &its[i]
		if it.raw != nil {
			role := llm.RoleAssistant
			if strings.HasSuffix(it.Type, "_output") {
				role = llm.RoleUser
			}
			add(role, false, llm.Part{Type: llm.PartOpaque, Raw: it.raw, Origin: llm.FormatResponses})
			continue
		}
		switch it.Type {
		case "message":
			ps := contentParts(it.Content)
			switch it.Role {
			case "user":
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: ps})
			case "assistant":
				add(llm.RoleAssistant, false, ps...)
			case "system", "developer":
				if len(req.Messages) == 0 {
					req.System = append(req.System, ps...)
				} else {
					req.Messages = append(req.Messages, llm.Message{Role: llm.RoleSystem, Parts: ps})
				}
			default:
				return llm.Invalid("decode responses request: input[%d]: unknown role %q", i, it.Role)
			}
		case "function_call":
			add(llm.RoleAssistant, false, llm.Part{Type: llm.PartToolCall, ID: it.CallID, Name: it.Name, Namespace: it.Namespace, Arguments: it.Arguments})
		case "function_call_output":
			add(llm.RoleUser, true, llm.Part{Type: llm.PartToolResult, ID: it.CallID, Content: contentParts(it.Output)})
		case "reasoning":
			add(llm.RoleAssistant, false, reasoningPart(it))
		}
	}
	return nil
}

func reasoningPart(it *item) llm.Part {
	texts := make([]string, 0, len(it.Summary))
	for _, s := range it.Summary {
		texts = append(texts, s.Text)
	}
	if len(texts) == 0 {
		for _, c := range it.Content {
			texts = append(texts, c.Text)
		}
	}
	return llm.Part{Type: llm.PartThinking, ID: it.ID, Text: strings.Join(texts, "\n\n"), Signature: it.EncryptedContent, Origin: llm.FormatResponses}
}

func onlyResults(m llm.Message) bool {
	for _, p := range m.Parts {
		if p.Type != llm.PartToolResult {
			return false
		}
	}
	return len(m.Parts) > 0
}

func contentParts(ps parts) []llm.Part {
	out := make([]llm.Part, 0, len(ps))
	for _, p := range ps {
		switch {
		case p.raw != nil:
			out = append(out, llm.Part{Type: llm.PartOpaque, Raw: p.raw, Origin: llm.FormatResponses})
		case p.Type == "input_image":
			out = append(out, wire.ImagePart(p.ImageURL))
		case p.Type == "refusal":
			out = append(out, llm.Text(p.Refusal))
		default:
			out = append(out, llm.Text(p.Text))
		}
	}
	return out
}

// EncodeRequest implements llm.Codec.
func (Codec) EncodeRequest(req *llm.Request) ([]byte, error) {
	var j wire.W
	j.B = make([]byte, 0, 1024)
	j.Obj().KStr("model", req.Model)
	var sys []string
	for _, p := range req.System {
		if p.Type == llm.PartText && p.Text != "" {
			sys = append(sys, p.Text)
		}
	}
	if len(sys) > 0 {
		j.KStr("instructions", strings.Join(sys, "\n\n"))
	}
	j.KArr("input")
	for i := range req.Messages {
		writeItems(&j, &req.Messages[i])
	}
	j.End()
	writeTools(&j, req)
	j.KIntOmit("max_output_tokens", req.MaxTokens).KFloat("temperature", req.Temperature).KFloat("top_p", req.TopP)
	if rs := req.Reasoning; rs != nil {
		j.KObj("reasoning")
		switch {
		case rs.Disabled:
			j.KStr("effort", "none")
		case rs.Effort != "":
			j.KStr("effort", rs.Effort)
		default:
			j.KStr("effort", llm.BudgetEffort(rs.BudgetTokens))
		}
		j.KStrOmit("summary", rs.Summary).End()
	}
	if req.Stream {
		j.KBool("stream", true)
	}
	j.KStrOmit("user", req.User)
	j.Extra(req.Extra.For(llm.FormatResponses), func(k string) bool { return knownRequest[k] })
	return j.End().B, nil
}

func writeTools(j *wire.W, req *llm.Request) {
	n := 0
	for _, t := range req.Tools {
		if t.Raw == nil || t.Origin == llm.FormatResponses {
			n++
		}
	}
	if n == 0 {
		return
	}
	j.KArr("tools")
	for i := 0; i < len(req.Tools); i++ {
		t := &req.Tools[i]
		switch {
		case t.Raw != nil:
			if t.Origin == llm.FormatResponses {
				j.Raw(t.Raw)
			}
		case t.Namespace != "":
			// Consecutive tools of a namespace are one namespace tool.
			j.Obj().KStr("type", "namespace").KStr("name", t.Namespace).KStr("description", "").KArr("tools")
			for ; i < len(req.Tools) && req.Tools[i].Raw == nil && req.Tools[i].Namespace == t.Namespace; i++ {
				writeFunction(j, &req.Tools[i])
			}
			i--
			j.End().End()
		default:
			writeFunction(j, t)
		}
	}
	j.End()
	if tc := req.ToolChoice; tc != nil {
		j.Key("tool_choice")
		switch tc.Mode {
		case llm.ToolChoiceTool:
			j.Obj().KStr("type", "function").KStr("name", tc.Name).End()
		default:
			j.Str(string(tc.Mode))
		}
	}
	if req.ParallelToolCalls != nil {
		j.KBool("parallel_tool_calls", *req.ParallelToolCalls)
	}
}

func writeFunction(j *wire.W, t *llm.Tool) {
	j.Obj().KStr("type", "function").KStr("name", t.Name).KStrOmit("description", t.Description)
	if len(t.Parameters) > 0 {
		j.KRaw("parameters", t.Parameters)
	} else {
		j.KRaw("parameters", json.RawMessage(`{"type":"object","properties":{}}`))
	}
	j.KBool("strict", false).End()
}

func writeItems(j *wire.W, m *llm.Message) {
	switch m.Role {
	case llm.RoleSystem:
		j.Obj().KStr("type", "message").KStr("role", "developer").KArr("content")
		for i := range m.Parts {
			if m.Parts[i].Type == llm.PartText {
				j.Obj().KStr("type", "input_text").KStr("text", m.Parts[i].Text).End()
			}
		}
		j.End().End()
	case llm.RoleAssistant:
		for i := 0; i < len(m.Parts); i++ {
			p := &m.Parts[i]
			switch p.Type {
			case llm.PartText:
				j.Obj().KStr("type", "message").KStr("role", "assistant").KArr("content")
				for ; i < len(m.Parts) && m.Parts[i].Type == llm.PartText; i++ {
					j.Obj().KStr("type", "output_text").KStr("text", m.Parts[i].Text).End()
				}
				i--
				j.End().End()
			case llm.PartToolCall:
				j.Obj().KStr("type", "function_call").KStr("call_id", p.ID).KStr("name", p.Name).
					KStrOmit("namespace", p.Namespace).KStr("arguments", p.Arguments).End()
			case llm.PartThinking:
				if p.Origin == llm.FormatResponses {
					writeReasoning(j, p)
				}
			case llm.PartOpaque:
				if p.Origin == llm.FormatResponses {
					j.Raw(p.Raw)
				}
			}
		}
	default:
		for i := range m.Parts {
			p := &m.Parts[i]
			switch p.Type {
			case llm.PartToolResult:
				j.Obj().KStr("type", "function_call_output").KStr("call_id", p.ID)
				writeOutput(j, p.Content)
				j.End()
			case llm.PartOpaque:
				if p.Origin == llm.FormatResponses && isItem(p.Raw) {
					j.Raw(p.Raw)
				}
			}
		}
		if !hasContent(m.Parts) {
			return
		}
		j.Obj().KStr("type", "message").KStr("role", "user").KArr("content")
		for i := range m.Parts {
			writeInputPart(j, &m.Parts[i])
		}
		j.End().End()
	}
}

// isItem tells an opaque input item (custom_tool_call_output…) from an
// opaque content part (input_file…), both of which come back as opaque
// parts of a user message.
func isItem(raw json.RawMessage) bool { return strings.HasSuffix(rawType(raw), "_output") }

// rawType is the type member of a raw item or part.
func rawType(raw json.RawMessage) string {
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &t)
	return t.Type
}

var _ llm.TranslationChecker = Codec{}

// stateful are the request members that refer to what OpenAI keeps of
// earlier calls.
var stateful = []string{"previous_response_id", "conversation"}

// CheckTranslation implements llm.TranslationChecker: a request that
// refers to earlier turns OpenAI keeps (previous_response_id,
// conversation), or holds a file (input_file, by id or inline), cannot be
// sent in another format without losing them: it is refused.
func (Codec) CheckTranslation(req *llm.Request) error {
	for _, f := range req.Extra.For(llm.FormatResponses) {
		if slices.Contains(stateful, f.Name) && string(f.Value) != "null" {
			return llm.Invalid("%s is not supported for this model: its provider does not speak the Responses API, and a translated request cannot refer to earlier responses (send the whole conversation in input)", f.Name)
		}
	}
	var file func(ps []llm.Part) bool
	file = func(ps []llm.Part) bool {
		for i := range ps {
			p := &ps[i]
			if p.Type == llm.PartOpaque && p.Origin == llm.FormatResponses && rawType(p.Raw) == "input_file" || file(p.Content) {
				return true
			}
		}
		return false
	}
	found := file(req.System)
	for i := range req.Messages {
		found = found || file(req.Messages[i].Parts)
	}
	if found {
		return llm.Invalid("input_file is not supported for this model: its provider does not speak the Responses API, and a file cannot be translated")
	}
	return nil
}

func hasContent(ps []llm.Part) bool {
	for i := range ps {
		switch ps[i].Type {
		case llm.PartText, llm.PartImage:
			return true
		case llm.PartOpaque:
			if ps[i].Origin == llm.FormatResponses && !isItem(ps[i].Raw) {
				return true
			}
		}
	}
	return false
}

func writeInputPart(j *wire.W, p *llm.Part) {
	switch p.Type {
	case llm.PartText:
		j.Obj().KStr("type", "input_text").KStr("text", p.Text).End()
	case llm.PartImage:
		j.Obj().KStr("type", "input_image").KStr("image_url", wire.DataURL(p)).End()
	case llm.PartOpaque:
		if p.Origin == llm.FormatResponses && !isItem(p.Raw) {
			j.Raw(p.Raw)
		}
	}
}

// writeOutput writes a function call's output: a string, or parts when
// there are images.
func writeOutput(j *wire.W, content []llm.Part) {
	images := false
	for _, c := range content {
		images = images || c.Type == llm.PartImage
	}
	if !images {
		var b strings.Builder
		for _, c := range content {
			b.WriteString(c.Text)
		}
		j.KStr("output", b.String())
		return
	}
	j.KArr("output")
	for i := range content {
		writeInputPart(j, &content[i])
	}
	j.End()
}

// writeReasoning writes a reasoning item.
func writeReasoning(j *wire.W, p *llm.Part) {
	j.Obj().KStr("id", reasoningID(p.ID)).KStr("type", "reasoning").KArr("summary")
	if p.Text != "" {
		j.Obj().KStr("type", "summary_text").KStr("text", p.Text).End()
	}
	j.End()
	if p.Origin == llm.FormatResponses && p.Signature != "" {
		j.KStr("encrypted_content", p.Signature)
	}
	j.End()
}

func reasoningID(id string) string {
	if id == "" {
		return llm.NewID("rs_")
	}
	return id
}
