package anthropic

import (
	"bytes"
	"encoding/json"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

type request struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        blocks          `json:"system"`
	Messages      []message       `json:"messages"`
	Tools         []tool          `json:"tools"`
	ToolChoice    *toolChoice     `json:"tool_choice"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	StopSequences []string        `json:"stop_sequences"`
	Stream        bool            `json:"stream"`
	Thinking      *thinkingConfig `json:"thinking"`
	Metadata      map[string]any  `json:"metadata"`
}

var knownRequest = map[string]bool{
	"model": true, "max_tokens": true, "system": true, "messages": true, "tools": true,
	"tool_choice": true, "temperature": true, "top_p": true, "top_k": true,
	"stop_sequences": true, "stream": true, "thinking": true, "metadata": true,
}

type message struct {
	Role    string `json:"role"`
	Content blocks `json:"content"`
}

// blocks is content: a string (one text block) or an array of blocks.
type blocks []block

func (b *blocks) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*b = blocks{{Type: "text", Text: s}}
		return nil
	}
	// Blocks are plain structs (a custom decoder for each would make
	// encoding/json scan every block twice more); the rare ones the model
	// has no place for are taken raw afterwards.
	if err := json.Unmarshal(data, (*[]block)(b)); err != nil {
		return err
	}
	for i := range *b {
		if !(*b)[i].known() {
			(*b)[i].raw = wire.At(data, i)
		}
	}
	return nil
}

type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Source       *source         `json:"source"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      blocks          `json:"content"`
	IsError      bool            `json:"is_error"`
	Thinking     string          `json:"thinking"`
	Signature    string          `json:"signature"`
	Data         string          `json:"data"`
	CacheControl json.RawMessage `json:"cache_control"`
	raw          json.RawMessage
}

// known reports whether the model has a place for b; documents, file
// images, server tools and the like are Anthropic's alone.
func (b *block) known() bool {
	switch b.Type {
	case "text", "tool_use", "tool_result", "thinking", "redacted_thinking":
		return true
	case "image":
		return b.Source != nil && (b.Source.Type == "base64" || b.Source.Type == "url")
	}
	return false
}

type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type tool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

type thinkingConfig struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

func unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// DecodeRequest implements llm.Codec.
func (Codec) DecodeRequest(body []byte) (*llm.Request, error) {
	var r request
	if err := llm.DecodeRequestJSON(body, &r, "anthropic messages"); err != nil {
		return nil, err
	}
	req := &llm.Request{
		Model: r.Model, MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK,
		Stop: r.StopSequences, Stream: r.Stream, StreamUsage: true,
	}
	for _, b := range r.System {
		if b.Type == "text" {
			req.System = append(req.System, llm.Part{Type: llm.PartText, Text: b.Text, CacheControl: b.CacheControl})
		}
	}
	req.Messages = make([]llm.Message, 0, len(r.Messages))
	for i, m := range r.Messages {
		var role llm.Role
		switch m.Role {
		case "user":
			role = llm.RoleUser
		case "assistant":
			role = llm.RoleAssistant
		case "system": // claude-code sends them mid-conversation
			role = llm.RoleSystem
		default:
			return nil, llm.Invalid("decode anthropic messages request: messages[%d]: unknown role %q", i, m.Role)
		}
		req.Messages = append(req.Messages, llm.Message{Role: role, Parts: decodeBlocks(m.Content)})
	}
	for i, t := range r.Tools {
		if t.Type != "" && t.Type != "custom" { // a server tool
			req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Raw: wire.At(body, "tools", i), Origin: llm.FormatAnthropic})
			continue
		}
		req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, CacheControl: t.CacheControl})
	}
	if tc := r.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceAuto}
		case "any":
			req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceRequired}
		case "none":
			req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceNone}
		case "tool":
			req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: tc.Name}
		}
		if tc.DisableParallelToolUse {
			f := false
			req.ParallelToolCalls = &f
		}
	}
	if th := r.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			req.Reasoning = &llm.Reasoning{BudgetTokens: th.BudgetTokens}
		case "disabled":
			req.Reasoning = &llm.Reasoning{Disabled: true}
		case "adaptive":
			req.Reasoning = &llm.Reasoning{Effort: "medium"}
		}
	}
	if u, ok := r.Metadata["user_id"].(string); ok {
		req.User = u
	}
	extra, err := wire.Extra(llm.FormatAnthropic, body, func(k string) bool { return knownRequest[k] })
	if err != nil {
		return nil, llm.Invalid("decode anthropic messages request: %v", err)
	}
	req.Extra = extra
	return req, nil
}

func decodeBlocks(bs blocks) []llm.Part {
	parts := make([]llm.Part, 0, len(bs))
	for i := range bs {
		parts = append(parts, decodeBlock(&bs[i]))
	}
	return parts
}

func decodeBlock(b *block) llm.Part {
	if b.raw != nil {
		return llm.Part{Type: llm.PartOpaque, Raw: b.raw, Origin: llm.FormatAnthropic}
	}
	p := llm.Part{CacheControl: b.CacheControl}
	switch b.Type {
	case "text":
		p.Type, p.Text = llm.PartText, b.Text
	case "image":
		p.Type = llm.PartImage
		if b.Source.Type == "url" {
			p.URL = b.Source.URL
		} else {
			p.MediaType, p.Data = b.Source.MediaType, b.Source.Data
		}
	case "tool_use":
		p.Type, p.ID, p.Name, p.Arguments = llm.PartToolCall, b.ID, b.Name, string(b.Input)
		if p.Arguments == "" {
			p.Arguments = "{}"
		}
	case "tool_result":
		p.Type, p.ID, p.IsError = llm.PartToolResult, b.ToolUseID, b.IsError
		p.Content = decodeBlocks(b.Content)
	case "thinking":
		p.Type, p.Text, p.Signature, p.Origin = llm.PartThinking, b.Thinking, b.Signature, llm.FormatAnthropic
	case "redacted_thinking":
		p.Type, p.Redacted, p.Signature, p.Origin = llm.PartThinking, true, b.Data, llm.FormatAnthropic
	}
	return p
}

// EncodeRequest implements llm.Codec.
func (Codec) EncodeRequest(req *llm.Request) ([]byte, error) {
	return encodeRequest(req, false), nil
}

// encodeRequest writes a Messages request, or a count_tokens one (fewer
// members: the endpoint rejects the others).
func encodeRequest(req *llm.Request, count bool) []byte {
	var j wire.W
	j.B = make([]byte, 0, 1024)
	j.Obj().KStr("model", req.Model)
	budget := 0
	if rs := req.Reasoning; rs != nil && !rs.Disabled {
		budget = rs.BudgetTokens
		if budget == 0 {
			budget = llm.EffortBudget(rs.Effort)
		}
	}
	if !count {
		max := req.MaxTokens
		if max == 0 {
			max = DefaultMaxTokens
		}
		// Anthropic wants 1024 <= budget_tokens < max_tokens.
		budget = min(budget, max-1)
		if budget < 1024 {
			budget = 0
		}
		j.KInt("max_tokens", max)
	}
	system := req.System
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem {
			system = append(system[:len(system):len(system)], m.Parts...)
		}
	}
	writeSystem(&j, system)
	j.KArr("messages")
	writeMessages(&j, req.Messages)
	j.End()
	writeTools(&j, req)
	if budget > 0 {
		j.KObj("thinking").KStr("type", "enabled").KInt("budget_tokens", budget).End()
	} else if req.Reasoning != nil && req.Reasoning.Disabled {
		j.KObj("thinking").KStr("type", "disabled").End()
	}
	if !count {
		if budget == 0 { // thinking allows none of these
			j.KFloat("temperature", req.Temperature).KFloat("top_p", req.TopP)
			if req.TopK != nil {
				j.KInt("top_k", *req.TopK)
			}
		}
		if len(req.Stop) > 0 {
			j.KArr("stop_sequences")
			for _, s := range req.Stop {
				j.Str(s)
			}
			j.End()
		}
		if req.Stream {
			j.KBool("stream", true)
		}
		if req.User != "" {
			j.KObj("metadata").KStr("user_id", req.User).End()
		}
	}
	j.Extra(req.Extra.For(llm.FormatAnthropic), func(k string) bool {
		return knownRequest[k] || (count && k != "mcp_servers" && k != "context_management")
	})
	return j.End().B
}

func writeSystem(j *wire.W, system []llm.Part) {
	var n int
	cached := false
	for _, p := range system {
		if p.Type == llm.PartText && p.Text != "" {
			n++
			cached = cached || len(p.CacheControl) > 0
		}
	}
	switch {
	case n == 0:
		return
	case n == 1 && !cached:
		for _, p := range system {
			if p.Type == llm.PartText && p.Text != "" {
				j.KStr("system", p.Text)
			}
		}
		return
	}
	j.KArr("system")
	for _, p := range system {
		if p.Type == llm.PartText && p.Text != "" {
			j.Obj().KStr("type", "text").KStr("text", p.Text).KRaw("cache_control", p.CacheControl).End()
		}
	}
	j.End()
}

// writeMessages writes the conversation, merging consecutive messages of a
// role (tool results from formats that give each its own message) and
// leaving out messages left empty by parts Anthropic cannot take.
func writeMessages(j *wire.W, msgs []llm.Message) {
	for i := 0; i < len(msgs); {
		role := msgs[i].Role
		if role == llm.RoleSystem {
			i++
			continue
		}
		k := i + 1
		for k < len(msgs) && (msgs[k].Role == role || msgs[k].Role == llm.RoleSystem) {
			k++
		}
		if !anyBlock(msgs[i:k]) {
			i = k
			continue
		}
		j.Obj().KStr("role", string(role)).KArr("content")
		for _, m := range msgs[i:k] {
			if m.Role == role {
				for pi := range m.Parts {
					writeBlock(j, &m.Parts[pi], false)
				}
			}
		}
		j.End().End()
		i = k
	}
}

func anyBlock(msgs []llm.Message) bool {
	for _, m := range msgs {
		if m.Role == llm.RoleSystem {
			continue
		}
		for pi := range m.Parts {
			if writable(&m.Parts[pi], false) {
				return true
			}
		}
	}
	return false
}

// writable reports whether a part becomes a block. Towards a client
// (output), thinking from other formats is shown unsigned; towards an
// upstream, only Anthropic's own signed thinking may go back.
func writable(p *llm.Part, output bool) bool {
	switch p.Type {
	case llm.PartText:
		return p.Text != "" || output
	case llm.PartThinking:
		return output || (p.Origin == llm.FormatAnthropic && p.Signature != "")
	case llm.PartOpaque:
		return p.Origin == llm.FormatAnthropic
	case llm.PartImage, llm.PartToolCall, llm.PartToolResult:
		return true
	}
	return false
}

func writeBlock(j *wire.W, p *llm.Part, output bool) {
	if !writable(p, output) {
		return
	}
	switch p.Type {
	case llm.PartText:
		j.Obj().KStr("type", "text").KStr("text", p.Text)
	case llm.PartImage:
		j.Obj().KStr("type", "image")
		writeSource(j, p)
	case llm.PartToolCall:
		j.Obj().KStr("type", "tool_use").KStr("id", p.ID).KStr("name", llm.QualifiedName(p.Namespace, p.Name)).
			KRaw("input", wire.ArgumentsObject(p.Arguments))
	case llm.PartToolResult:
		j.Obj().KStr("type", "tool_result").KStr("tool_use_id", p.ID)
		writeResultContent(j, p.Content)
		if p.IsError {
			j.KBool("is_error", true)
		}
	case llm.PartThinking:
		sig := ""
		if p.Origin == llm.FormatAnthropic {
			sig = p.Signature
		}
		if p.Redacted && sig != "" {
			j.Obj().KStr("type", "redacted_thinking").KStr("data", sig)
		} else {
			j.Obj().KStr("type", "thinking").KStr("thinking", p.Text).KStr("signature", sig)
		}
	case llm.PartOpaque:
		j.Raw(p.Raw)
		return
	}
	j.KRaw("cache_control", p.CacheControl).End()
}

func writeSource(j *wire.W, p *llm.Part) {
	if p.URL != "" {
		j.KObj("source").KStr("type", "url").KStr("url", p.URL).End()
		return
	}
	j.KObj("source").KStr("type", "base64").KStr("media_type", p.MediaType).KStr("data", p.Data).End()
}

func writeResultContent(j *wire.W, content []llm.Part) {
	if len(content) == 1 && content[0].Type == llm.PartText && len(content[0].CacheControl) == 0 {
		j.KStr("content", content[0].Text)
		return
	}
	if len(content) == 0 {
		return
	}
	j.KArr("content")
	for i := range content {
		p := &content[i]
		switch p.Type {
		case llm.PartText:
			if p.Text != "" {
				j.Obj().KStr("type", "text").KStr("text", p.Text).KRaw("cache_control", p.CacheControl).End()
			}
		case llm.PartImage:
			j.Obj().KStr("type", "image")
			writeSource(j, p)
			j.End()
		}
	}
	j.End()
}

func writeTools(j *wire.W, req *llm.Request) {
	n := 0
	for _, t := range req.Tools {
		if t.Raw == nil || t.Origin == llm.FormatAnthropic {
			n++
		}
	}
	if n > 0 {
		j.KArr("tools")
		for _, t := range req.Tools {
			switch {
			case t.Raw != nil && t.Origin == llm.FormatAnthropic:
				j.Raw(t.Raw)
			case t.Raw == nil:
				schema := t.Parameters
				if len(bytes.TrimSpace(schema)) == 0 || string(schema) == "null" {
					schema = json.RawMessage(`{"type":"object","properties":{}}`)
				}
				j.Obj().KStr("name", llm.QualifiedName(t.Namespace, t.Name)).KStrOmit("description", t.Description).
					KRaw("input_schema", schema).KRaw("cache_control", t.CacheControl).End()
			}
		}
		j.End()
	}
	tc := req.ToolChoice
	noParallel := req.ParallelToolCalls != nil && !*req.ParallelToolCalls
	if tc == nil && !noParallel || n == 0 {
		return
	}
	j.KObj("tool_choice")
	switch {
	case tc == nil || tc.Mode == llm.ToolChoiceAuto:
		j.KStr("type", "auto")
	case tc.Mode == llm.ToolChoiceNone:
		j.KStr("type", "none")
	case tc.Mode == llm.ToolChoiceRequired:
		j.KStr("type", "any")
	case tc.Mode == llm.ToolChoiceTool:
		j.KStr("type", "tool").KStr("name", tc.Name)
	}
	if noParallel && (tc == nil || tc.Mode != llm.ToolChoiceNone) {
		j.KBool("disable_parallel_tool_use", true)
	}
	j.End()
}
