package llmtest

import (
	"strings"

	"github.com/agent2env/agent2env/internal/llm"
)

// This file says, format by format, what a trip through a wire format
// keeps of the canonical model: the documented losses, checked by the
// suite. A change in a codec that loses more fails the suite; one that
// keeps more must update this file.

// Prepare marks the parts of a case the way f's decoder would: thinking
// comes from f (so its signatures may go back to f).
func Prepare(f llm.Format, parts []llm.Part) {
	for i := range parts {
		if parts[i].Type == llm.PartThinking {
			parts[i].Origin = f
		}
	}
}

// PrepareRequest applies Prepare to every message of req.
func PrepareRequest(f llm.Format, req *llm.Request) {
	for i := range req.Messages {
		Prepare(f, req.Messages[i].Parts)
	}
}

// ExpectRequest is what decoding f's encoding of req gives.
func ExpectRequest(f llm.Format, req *llm.Request) *llm.Request {
	r := CloneRequest(req)
	r.StreamUsage = true
	if f == llm.FormatOpenAI {
		r.StreamUsage = r.Stream
	}
	if r.Extra.Format != f {
		r.Extra = llm.Extra{}
	}
	hasTools := len(r.Tools) > 0
	if !hasTools {
		r.ToolChoice, r.ParallelToolCalls = nil, nil
	}
	if f != llm.FormatResponses {
		flattenNames(r)
	}
	if f != llm.FormatAnthropic {
		for i := range r.System {
			r.System[i].CacheControl = nil
		}
		for i := range r.Tools {
			r.Tools[i].CacheControl = nil
		}
	}
	eachPart(r, func(p *llm.Part) {
		if p.Type == llm.PartImage && p.URL != "" && f != llm.FormatGemini {
			p.MediaType = ""
		}
		if p.Type == llm.PartToolResult && f != llm.FormatGemini {
			p.Name = ""
		}
		if p.Type == llm.PartThinking && f != llm.FormatResponses {
			p.ID = ""
		}
		if f != llm.FormatAnthropic {
			p.CacheControl = nil
		}
	})
	switch f {
	case llm.FormatAnthropic:
		r.System = append(r.System, takeSystem(r)...)
		r.Messages = mergeRoles(r.Messages)
		keepParts(r, func(p *llm.Part) bool {
			return (p.Type != llm.PartThinking || p.Signature != "") && (p.Type != llm.PartText || p.Text != "")
		})
		if r.MaxTokens == 0 {
			r.MaxTokens = 8192
		}
		if rs := r.Reasoning; rs != nil {
			switch {
			case rs.Disabled:
				r.Reasoning = &llm.Reasoning{Disabled: true}
			default:
				budget := rs.BudgetTokens
				if budget == 0 {
					budget = llm.EffortBudget(rs.Effort)
				}
				budget = min(budget, r.MaxTokens-1)
				r.Reasoning = nil
				if budget >= 1024 {
					r.Reasoning = &llm.Reasoning{BudgetTokens: budget}
					r.Temperature, r.TopP, r.TopK = nil, nil, nil
				}
			}
		}
		if r.ParallelToolCalls != nil && *r.ParallelToolCalls {
			r.ParallelToolCalls = nil
		}
		if r.ParallelToolCalls != nil && r.ToolChoice == nil {
			r.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceAuto}
		}
	case llm.FormatOpenAI:
		r.TopK = nil
		r.System = joinSystem(r.System)
		for i := range r.Messages {
			if r.Messages[i].Role == llm.RoleSystem {
				r.Messages[i].Parts = joinSystem(r.Messages[i].Parts)
			}
		}
		r.Messages = splitResults(r.Messages)
		for i := range r.Messages {
			if r.Messages[i].Role == llm.RoleAssistant {
				r.Messages[i].Parts = chatAssistant(r.Messages[i].Parts)
			}
		}
		eachPart(r, func(p *llm.Part) {
			if p.Type == llm.PartToolResult {
				p.IsError = false
				p.Content = []llm.Part{llm.Text(joinTexts(p.Content))}
			}
		})
		r.Reasoning = effortOnly(r.Reasoning, false)
	case llm.FormatResponses:
		r.TopK, r.Stop = nil, nil
		r.System = joinSystem(r.System)
		r.Messages = splitResults(r.Messages)
		r.Messages = mergeAssistant(r.Messages)
		keepParts(r, func(p *llm.Part) bool { return p.Type != llm.PartThinking || p.Origin == llm.FormatResponses })
		eachPart(r, func(p *llm.Part) {
			if p.Type == llm.PartToolResult {
				p.IsError = false
				p.Content = []llm.Part{llm.Text(joinTexts(p.Content))}
			}
		})
		r.Reasoning = effortOnly(r.Reasoning, true)
	case llm.FormatGemini:
		r.System = append(r.System, takeSystem(r)...)
		r.ParallelToolCalls = nil
		r.User = ""
		names := map[string]string{}
		eachPart(r, func(p *llm.Part) {
			switch p.Type {
			case llm.PartToolCall:
				names[p.ID] = p.Name
			case llm.PartToolResult:
				if p.Name == "" {
					p.Name = names[p.ID]
				}
				p.Content = []llm.Part{llm.Text(joinTexts(p.Content))}
			case llm.PartImage:
				if p.URL != "" && p.MediaType == "" {
					p.MediaType = "image/jpeg"
				}
			}
		})
		if rs := r.Reasoning; rs != nil {
			switch {
			case rs.Disabled:
				r.Reasoning = &llm.Reasoning{Disabled: true}
			case rs.BudgetTokens > 0:
				r.Reasoning = &llm.Reasoning{BudgetTokens: rs.BudgetTokens}
			default:
				r.Reasoning = &llm.Reasoning{BudgetTokens: llm.EffortBudget(rs.Effort)}
			}
		}
	}
	return r
}

// ExpectResponse is what decoding f's encoding of resp gives, whole
// (stream false) or streamed.
func ExpectResponse(f llm.Format, req *llm.Request, resp *llm.Response, stream bool) *llm.Response {
	r := CloneResponse(resp)
	if f != llm.FormatAnthropic {
		r.Usage.CacheWriteTokens = 0
		if r.StopReason == llm.StopSequence || r.StopReason == llm.StopPauseTurn {
			r.StopReason = llm.StopEndTurn
		}
		r.StopSequence = ""
	}
	if f != llm.FormatResponses {
		for i := range r.Content {
			if p := &r.Content[i]; p.Type == llm.PartToolCall && p.Namespace != "" {
				p.Name, p.Namespace = llm.QualifiedName(p.Namespace, p.Name), ""
			}
		}
	}
	for i := range r.Content {
		p := &r.Content[i]
		if p.Type == llm.PartThinking {
			if f != llm.FormatResponses {
				p.ID = ""
			}
			if f == llm.FormatOpenAI {
				p.Signature = ""
			}
		}
	}
	switch f {
	case llm.FormatAnthropic:
		r.Usage.ReasoningTokens = 0
		if r.StopReason == llm.StopContentFilter {
			r.StopReason = llm.StopRefusal
		}
	case llm.FormatOpenAI:
		if r.StopReason == llm.StopRefusal {
			r.StopReason = llm.StopContentFilter
		}
		r.Content = chatAssistant(r.Content)
	case llm.FormatResponses:
		if r.StopReason == llm.StopRefusal {
			r.StopReason = llm.StopEndTurn
		}
	case llm.FormatGemini:
		if r.StopReason == llm.StopRefusal {
			r.StopReason = llm.StopContentFilter
		}
		if stream {
			r.Content = mergeAdjacent(r.Content)
		}
	}
	if r.StopReason == llm.StopEndTurn && r.HasToolCalls() && f != llm.FormatAnthropic {
		r.StopReason = llm.StopToolUse
	}
	return r
}

func eachPart(r *llm.Request, fn func(*llm.Part)) {
	for mi := range r.Messages {
		for pi := range r.Messages[mi].Parts {
			fn(&r.Messages[mi].Parts[pi])
		}
	}
}

func keepParts(r *llm.Request, keep func(*llm.Part) bool) {
	msgs := r.Messages[:0]
	for _, m := range r.Messages {
		parts := m.Parts[:0]
		for i := range m.Parts {
			if keep(&m.Parts[i]) {
				parts = append(parts, m.Parts[i])
			}
		}
		if len(parts) > 0 {
			m.Parts = parts
			msgs = append(msgs, m)
		}
	}
	r.Messages = msgs
}

func flattenNames(r *llm.Request) {
	for i := range r.Tools {
		t := &r.Tools[i]
		t.Name, t.Namespace = llm.QualifiedName(t.Namespace, t.Name), ""
	}
	eachPart(r, func(p *llm.Part) {
		if p.Type == llm.PartToolCall {
			p.Name, p.Namespace = llm.QualifiedName(p.Namespace, p.Name), ""
		}
	})
}

// takeSystem removes the system messages of r and returns their parts.
func takeSystem(r *llm.Request) []llm.Part {
	var parts []llm.Part
	msgs := r.Messages[:0]
	for _, m := range r.Messages {
		if m.Role == llm.RoleSystem {
			parts = append(parts, m.Parts...)
		} else {
			msgs = append(msgs, m)
		}
	}
	r.Messages = msgs
	return parts
}

func mergeRoles(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	for _, m := range msgs {
		if n := len(out); n > 0 && out[n-1].Role == m.Role {
			out[n-1].Parts = append(out[n-1].Parts, m.Parts...)
			continue
		}
		out = append(out, m)
	}
	return out
}

func mergeAssistant(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	for _, m := range msgs {
		if n := len(out); n > 0 && m.Role == llm.RoleAssistant && out[n-1].Role == llm.RoleAssistant {
			out[n-1].Parts = append(out[n-1].Parts, m.Parts...)
			continue
		}
		out = append(out, m)
	}
	return out
}

func joinTexts(ps []llm.Part) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text)
	}
	return b.String()
}

func joinSystem(ps []llm.Part) []llm.Part {
	var texts []string
	for _, p := range ps {
		if p.Type == llm.PartText && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	if len(texts) == 0 {
		return nil
	}
	return []llm.Part{llm.Text(strings.Join(texts, "\n\n"))}
}

// splitResults gives the tool results of a user message their own message
// ahead of the rest, as formats with tool messages or items do.
func splitResults(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	for _, m := range msgs {
		if m.Role != llm.RoleUser {
			out = append(out, m)
			continue
		}
		var results, rest []llm.Part
		for _, p := range m.Parts {
			if p.Type == llm.PartToolResult {
				results = append(results, p)
			} else {
				rest = append(rest, p)
			}
		}
		if len(results) > 0 {
			if n := len(out); n > 0 && out[n-1].Role == llm.RoleUser && onlyResults(out[n-1].Parts) {
				out[n-1].Parts = append(out[n-1].Parts, results...)
			} else {
				out = append(out, llm.Message{Role: llm.RoleUser, Parts: results})
			}
		}
		if len(rest) > 0 || len(results) == 0 {
			out = append(out, llm.Message{Role: llm.RoleUser, Parts: rest})
		}
	}
	return out
}

func onlyResults(ps []llm.Part) bool {
	for _, p := range ps {
		if p.Type != llm.PartToolResult {
			return false
		}
	}
	return len(ps) > 0
}

// chatAssistant is an assistant turn as Chat Completions has it: its own
// reasoning, one text, then the calls.
func chatAssistant(ps []llm.Part) []llm.Part {
	var out []llm.Part
	var reasoning, text strings.Builder
	for _, p := range ps {
		switch p.Type {
		case llm.PartThinking:
			if p.Origin == llm.FormatOpenAI {
				reasoning.WriteString(p.Text)
			}
		case llm.PartText:
			text.WriteString(p.Text)
		}
	}
	if reasoning.Len() > 0 {
		out = append(out, llm.Part{Type: llm.PartThinking, Text: reasoning.String(), Origin: llm.FormatOpenAI})
	}
	if text.Len() > 0 {
		out = append(out, llm.Text(text.String()))
	}
	for _, p := range ps {
		if p.Type == llm.PartToolCall {
			out = append(out, p)
		}
	}
	return out
}

func mergeAdjacent(ps []llm.Part) []llm.Part {
	var out []llm.Part
	for _, p := range ps {
		if n := len(out); n > 0 && (p.Type == llm.PartText || p.Type == llm.PartThinking) && out[n-1].Type == p.Type && out[n-1].Signature == "" {
			out[n-1].Text += p.Text
			out[n-1].Signature = p.Signature
			continue
		}
		out = append(out, p)
	}
	return out
}

// effortOnly is reasoning as the OpenAI formats ask for it: an effort.
func effortOnly(rs *llm.Reasoning, summary bool) *llm.Reasoning {
	if rs == nil {
		return nil
	}
	out := &llm.Reasoning{}
	if summary {
		out.Summary = rs.Summary
	}
	switch {
	case rs.Disabled:
		if !summary {
			return nil
		}
		out.Disabled = true
	case rs.Effort != "":
		out.Effort = rs.Effort
	default:
		out.Effort = llm.BudgetEffort(rs.BudgetTokens)
	}
	return out
}

// CloneRequest is a deep copy of r.
func CloneRequest(r *llm.Request) *llm.Request {
	c := *r
	c.System = cloneParts(r.System)
	c.Messages = make([]llm.Message, len(r.Messages))
	for i, m := range r.Messages {
		c.Messages[i] = llm.Message{Role: m.Role, Parts: cloneParts(m.Parts)}
	}
	c.Tools = append([]llm.Tool(nil), r.Tools...)
	c.Stop = append([]string(nil), r.Stop...)
	if r.ToolChoice != nil {
		c.ToolChoice = ptr(*r.ToolChoice)
	}
	if r.Reasoning != nil {
		c.Reasoning = ptr(*r.Reasoning)
	}
	return &c
}

// CloneResponse is a deep copy of r.
func CloneResponse(r *llm.Response) *llm.Response {
	c := *r
	c.Content = cloneParts(r.Content)
	return &c
}

func cloneParts(ps []llm.Part) []llm.Part {
	if ps == nil {
		return nil
	}
	out := make([]llm.Part, len(ps))
	for i, p := range ps {
		p.Content = cloneParts(p.Content)
		out[i] = p
	}
	return out
}
