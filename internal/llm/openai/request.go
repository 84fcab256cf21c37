package openai

import (
	"encoding/json"
	"strings"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

type request struct {
	Model               string          `json:"model"`
	Messages            []message       `json:"messages"`
	Tools               []tool          `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ReasoningEffort string `json:"reasoning_effort"`
	User            string `json:"user"`
}

var knownRequest = map[string]bool{
	"model": true, "messages": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"max_tokens": true, "max_completion_tokens": true, "temperature": true, "top_p": true, "stop": true,
	"stream": true, "stream_options": true, "reasoning_effort": true, "user": true,
}

type message struct {
	Role             string          `json:"role"`
	Content          content         `json:"content"`
	Name             string          `json:"name"`
	ToolCalls        []toolCall      `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	Refusal          string          `json:"refusal"`
	FunctionCall     json.RawMessage `json:"function_call"`
}

// content is a message's content: a string or an array of parts.
type content []contentPart

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	Refusal string `json:"refusal"`
	raw     json.RawMessage
}

func (c *content) UnmarshalJSON(data []byte) error {
	switch {
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*c = content{{Type: "text", Text: s}}
		return nil
	case string(data) == "null":
		*c = nil
		return nil
	}
	// Parts are plain structs; the few the model has no place for (audio,
	// files) are taken raw afterwards.
	if err := json.Unmarshal(data, (*[]contentPart)(c)); err != nil {
		return err
	}
	for i := range *c {
		p := &(*c)[i]
		if !(p.Type == "text" || p.Type == "refusal" || (p.Type == "image_url" && p.ImageURL != nil)) {
			p.raw = wire.At(data, i)
		}
	}
	return nil
}

type toolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// DecodeRequest implements llm.Codec.
func (Codec) DecodeRequest(body []byte) (*llm.Request, error) {
	var r request
	if err := llm.DecodeRequestJSON(body, &r, "chat completions"); err != nil {
		return nil, err
	}
	req := &llm.Request{
		Model: r.Model, MaxTokens: r.MaxCompletionTokens, Temperature: r.Temperature, TopP: r.TopP,
		ParallelToolCalls: r.ParallelToolCalls, Stream: r.Stream, User: r.User,
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = r.MaxTokens
	}
	req.StreamUsage = r.StreamOptions != nil && r.StreamOptions.IncludeUsage
	if len(r.Stop) > 0 && string(r.Stop) != "null" {
		var one string
		if err := json.Unmarshal(r.Stop, &one); err == nil {
			req.Stop = []string{one}
		} else if err := json.Unmarshal(r.Stop, &req.Stop); err != nil {
			return nil, llm.Invalid("decode chat completions request: stop must be a string or an array of strings")
		}
	}
	if r.ReasoningEffort != "" {
		req.Reasoning = &llm.Reasoning{Effort: r.ReasoningEffort}
		if r.ReasoningEffort == "none" {
			req.Reasoning = &llm.Reasoning{Disabled: true}
		}
	}
	leading := true
	for i := range r.Messages {
		m := &r.Messages[i]
		switch m.Role {
		case "system", "developer":
			parts := textParts(m.Content)
			if leading {
				req.System = append(req.System, parts...)
			} else {
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleSystem, Parts: parts})
			}
			continue
		case "user":
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: contentParts(m.Content)})
		case "assistant":
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: assistantParts(m)})
		case "tool", "function":
			text := joinText(m.Content)
			res := llm.Part{Type: llm.PartToolResult, ID: m.ToolCallID, Content: []llm.Part{llm.Text(text)}}
			if m.Role == "function" {
				res.ID, res.Name = m.Name, m.Name
			}
			// Consecutive tool messages answer one assistant turn: one user message.
			if n := len(req.Messages); n > 0 && onlyResults(req.Messages[n-1]) {
				req.Messages[n-1].Parts = append(req.Messages[n-1].Parts, res)
			} else {
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{res}})
			}
		default:
			return nil, llm.Invalid("decode chat completions request: messages[%d]: unknown role %q", i, m.Role)
		}
		leading = false
	}
	for i, t := range r.Tools {
		if t.Type != "function" && t.Type != "" { // custom tools: ours alone
			req.Tools = append(req.Tools, llm.Tool{Name: t.Function.Name, Raw: wire.At(body, "tools", i), Origin: llm.FormatOpenAI})
			continue
		}
		req.Tools = append(req.Tools, llm.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	tc, err := DecodeToolChoice(r.ToolChoice, "chat completions request")
	if err != nil {
		return nil, err
	}
	req.ToolChoice = tc
	extra, err := wire.Extra(llm.FormatOpenAI, body, func(k string) bool { return knownRequest[k] })
	if err != nil {
		return nil, llm.Invalid("decode chat completions request: %v", err)
	}
	req.Extra = extra
	return req, nil
}

func onlyResults(m llm.Message) bool {
	if m.Role != llm.RoleUser || len(m.Parts) == 0 {
		return false
	}
	for _, p := range m.Parts {
		if p.Type != llm.PartToolResult {
			return false
		}
	}
	return true
}

// DecodeToolChoice reads the tool_choice of both OpenAI formats: "auto",
// "none", "required", or an object naming a function (under "function" in
// Chat Completions, at the top in Responses); other objects (allowed tools,
// built-in tools) leave the choice to the model. what names the request in
// errors.
func DecodeToolChoice(raw json.RawMessage, what string) (*llm.ToolChoice, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			return &llm.ToolChoice{Mode: llm.ToolChoiceAuto}, nil
		case "none":
			return &llm.ToolChoice{Mode: llm.ToolChoiceNone}, nil
		case "required":
			return &llm.ToolChoice{Mode: llm.ToolChoiceRequired}, nil
		}
		return nil, llm.Invalid("decode %s: unknown tool_choice %q", what, s)
	}
	var o struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, llm.Invalid("decode %s: tool_choice: %v", what, err)
	}
	if o.Type != "function" {
		return &llm.ToolChoice{Mode: llm.ToolChoiceAuto}, nil
	}
	name := o.Name
	if name == "" {
		name = o.Function.Name
	}
	return &llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: name}, nil
}

func textParts(c content) []llm.Part {
	var parts []llm.Part
	for _, p := range c {
		if p.Type == "text" {
			parts = append(parts, llm.Text(p.Text))
		}
	}
	return parts
}

func joinText(c content) string {
	if len(c) == 1 {
		return c[0].Text
	}
	var b strings.Builder
	for _, p := range c {
		b.WriteString(p.Text)
	}
	return b.String()
}

func contentParts(c content) []llm.Part {
	parts := make([]llm.Part, 0, len(c))
	for _, p := range c {
		switch {
		case p.raw != nil:
			parts = append(parts, llm.Part{Type: llm.PartOpaque, Raw: p.raw, Origin: llm.FormatOpenAI})
		case p.Type == "text":
			parts = append(parts, llm.Text(p.Text))
		case p.Type == "refusal":
			parts = append(parts, llm.Text(p.Refusal))
		case p.Type == "image_url":
			parts = append(parts, wire.ImagePart(p.ImageURL.URL))
		}
	}
	return parts
}

func assistantParts(m *message) []llm.Part {
	var parts []llm.Part
	reasoning := m.ReasoningContent
	if reasoning == "" {
		reasoning = m.Reasoning
	}
	if reasoning != "" {
		parts = append(parts, llm.Part{Type: llm.PartThinking, Text: reasoning, Origin: llm.FormatOpenAI})
	}
	for _, p := range contentParts(m.Content) {
		if p.Type != llm.PartText || p.Text != "" {
			parts = append(parts, p)
		}
	}
	if m.Refusal != "" {
		parts = append(parts, llm.Text(m.Refusal))
	}
	for _, tc := range m.ToolCalls {
		parts = append(parts, llm.Part{Type: llm.PartToolCall, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return parts
}

// EncodeRequest implements llm.Codec.
func (Codec) EncodeRequest(req *llm.Request) ([]byte, error) {
	var j wire.W
	j.B = make([]byte, 0, 1024)
	j.Obj().KStr("model", req.Model).KArr("messages")
	if text := systemText(req.System); text != "" {
		j.Obj().KStr("role", "system").KStr("content", text).End()
	}
	for i := range req.Messages {
		writeMessage(&j, &req.Messages[i])
	}
	j.End()
	tools := 0
	for _, t := range req.Tools {
		if t.Raw == nil || t.Origin == llm.FormatOpenAI {
			tools++
		}
	}
	if tools > 0 {
		j.KArr("tools")
		for _, t := range req.Tools {
			switch {
			case t.Raw == nil:
				j.Obj().KStr("type", "function").KObj("function").KStr("name", llm.QualifiedName(t.Namespace, t.Name)).
					KStrOmit("description", t.Description).KRaw("parameters", t.Parameters).End().End()
			case t.Origin == llm.FormatOpenAI:
				j.Raw(t.Raw)
			}
		}
		j.End()
		if tc := req.ToolChoice; tc != nil {
			j.Key("tool_choice")
			switch tc.Mode {
			case llm.ToolChoiceTool:
				j.Obj().KStr("type", "function").KObj("function").KStr("name", tc.Name).End().End()
			case llm.ToolChoiceRequired:
				j.Str("required")
			default:
				j.Str(string(tc.Mode))
			}
		}
		if req.ParallelToolCalls != nil {
			j.KBool("parallel_tool_calls", *req.ParallelToolCalls)
		}
	}
	j.KIntOmit("max_tokens", req.MaxTokens).KFloat("temperature", req.Temperature).KFloat("top_p", req.TopP)
	if len(req.Stop) > 0 {
		j.KArr("stop")
		for _, s := range req.Stop {
			j.Str(s)
		}
		j.End()
	}
	if rs := req.Reasoning; rs != nil {
		switch {
		case rs.Disabled:
		case rs.Effort != "":
			j.KStr("reasoning_effort", rs.Effort)
		default:
			j.KStr("reasoning_effort", llm.BudgetEffort(rs.BudgetTokens))
		}
	}
	if req.Stream {
		j.KBool("stream", true).KObj("stream_options").KBool("include_usage", true).End()
	}
	j.KStrOmit("user", req.User)
	j.Extra(req.Extra.For(llm.FormatOpenAI), func(k string) bool { return knownRequest[k] })
	return j.End().B, nil
}

func systemText(parts []llm.Part) string {
	var texts []string
	for _, p := range parts {
		if p.Type == llm.PartText && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n\n")
}

func writeMessage(j *wire.W, m *llm.Message) {
	switch m.Role {
	case llm.RoleSystem:
		if text := systemText(m.Parts); text != "" {
			j.Obj().KStr("role", "system").KStr("content", text).End()
		}
	case llm.RoleAssistant:
		writeAssistant(j, m.Parts)
	default:
		// Tool results first, each its own message, then the rest.
		rest := 0
		for i := range m.Parts {
			p := &m.Parts[i]
			if p.Type != llm.PartToolResult {
				if p.Type != llm.PartOpaque || p.Origin == llm.FormatOpenAI {
					rest++
				}
				continue
			}
			j.Obj().KStr("role", "tool").KStr("tool_call_id", p.ID).KStr("content", resultText(p)).End()
		}
		if rest == 0 {
			return
		}
		j.Obj().KStr("role", "user")
		writeContent(j, m.Parts)
		j.End()
	}
}

// resultText is a tool result's text; images are left out: Chat
// Completions tool messages carry only text.
func resultText(p *llm.Part) string {
	var b strings.Builder
	for _, c := range p.Content {
		if c.Type == llm.PartText {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func writeContent(j *wire.W, parts []llm.Part) {
	n, text := 0, -1
	for i := range parts {
		switch parts[i].Type {
		case llm.PartText:
			n, text = n+1, i
		case llm.PartImage:
			n++
		case llm.PartOpaque:
			if parts[i].Origin == llm.FormatOpenAI {
				n++
			}
		}
	}
	if n == 1 && text >= 0 {
		j.KStr("content", parts[text].Text)
		return
	}
	j.KArr("content")
	for i := range parts {
		p := &parts[i]
		switch p.Type {
		case llm.PartText:
			j.Obj().KStr("type", "text").KStr("text", p.Text).End()
		case llm.PartImage:
			j.Obj().KStr("type", "image_url").KObj("image_url").KStr("url", wire.DataURL(p)).End().End()
		case llm.PartOpaque:
			if p.Origin == llm.FormatOpenAI {
				j.Raw(p.Raw)
			}
		}
	}
	j.End()
}

func writeAssistant(j *wire.W, parts []llm.Part) {
	var text, reasoning strings.Builder
	calls := 0
	for i := range parts {
		switch p := &parts[i]; p.Type {
		case llm.PartText:
			text.WriteString(p.Text)
		case llm.PartThinking:
			// Only reasoning this format produced goes back (DeepSeek wants it).
			if p.Origin == llm.FormatOpenAI {
				reasoning.WriteString(p.Text)
			}
		case llm.PartToolCall:
			calls++
		}
	}
	j.Obj().KStr("role", "assistant")
	if text.Len() > 0 || calls == 0 {
		j.KStr("content", text.String())
	} else {
		j.Key("content").Null()
	}
	if reasoning.Len() > 0 {
		j.KStr("reasoning_content", reasoning.String())
	}
	if calls > 0 {
		j.KArr("tool_calls")
		for i := range parts {
			if p := &parts[i]; p.Type == llm.PartToolCall {
				writeToolCall(j, -1, p.ID, llm.QualifiedName(p.Namespace, p.Name), p.Arguments)
			}
		}
		j.End()
	}
	j.End()
}

// writeToolCall writes a tool call object; index >= 0 adds the stream index.
func writeToolCall(j *wire.W, index int, id, name, args string) {
	j.Obj()
	if index >= 0 {
		j.KInt("index", index)
	}
	j.KStr("id", id).KStr("type", "function").KObj("function").KStr("name", name).KStr("arguments", args).End().End()
}
