package agents

import (
	"encoding/json"
	"strings"
)

// StreamJSON parses the stream-json output of claude (--output-format
// stream-json --verbose) and of qwen (-o stream-json), which share one
// shape: a system/init line, assistant messages (text and tool_use
// blocks, with the model call's usage), user messages carrying
// tool_results, and a closing result line. The zero value is ready.
type StreamJSON struct {
	seen map[string]bool // assistant message ids already counted
}

type streamLine struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype"`
	SessionID string          `json:"session_id"`
	Model     string          `json:"model"`
	Message   *streamMessage  `json:"message"`
	IsError   bool            `json:"is_error"`
	Result    string          `json:"result"`
	Usage     *streamUsage    `json:"usage"`
	Error     json.RawMessage `json:"error"`
}

type streamMessage struct {
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
	Usage   *streamUsage    `json:"usage"`
}

type streamBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type streamUsage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadInputToken int64 `json:"cache_read_input_tokens"`
}

func (u *streamUsage) usage() *Usage {
	if u == nil {
		return nil
	}
	return &Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CacheReadInputToken}
}

// Line implements Parser.
func (p *StreamJSON) Line(line []byte) []Event {
	var l streamLine
	if evs, ok := DecodeJSONLine(line, &l); !ok {
		return evs
	}
	switch l.Type {
	case "system":
		if l.Subtype == "init" {
			return []Event{{Kind: KindStart, Text: strings.TrimSpace(l.SessionID + " " + l.Model)}}
		}
	case "assistant":
		return p.assistant(l.Message)
	case "user":
		return userResults(l.Message)
	case "result":
		text := l.Result
		if text == "" && len(l.Error) > 0 {
			text = string(l.Error)
		}
		return []Event{{Kind: KindResult, Text: text, IsError: l.IsError || (l.Subtype != "" && l.Subtype != "success"), Usage: l.Usage.usage()}}
	}
	return nil
}

func (p *StreamJSON) assistant(m *streamMessage) []Event {
	if m == nil {
		return nil
	}
	var evs []Event
	// One model call may arrive as several lines, one per content block,
	// each with the call's usage: count it once.
	if m.Usage != nil && (m.ID == "" || !p.seen[m.ID]) {
		if p.seen == nil {
			p.seen = map[string]bool{}
		}
		p.seen[m.ID] = true
		evs = append(evs, Event{Kind: KindLLMCall, Usage: m.Usage.usage()})
	}
	var blocks []streamBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		var text string
		if json.Unmarshal(m.Content, &text) == nil && text != "" {
			evs = append(evs, Event{Kind: KindMessage, Text: text})
		}
		return evs
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) != "" {
				evs = append(evs, Event{Kind: KindMessage, Text: b.Text})
			}
		case "tool_use":
			evs = append(evs, Event{Kind: KindToolCall, Tool: b.Name, ToolID: b.ID, Input: b.Input})
		}
	}
	return evs
}

func userResults(m *streamMessage) []Event {
	if m == nil {
		return nil
	}
	var blocks []streamBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil
	}
	var evs []Event
	for _, b := range blocks {
		if b.Type == "tool_result" {
			evs = append(evs, Event{Kind: KindToolResult, ToolID: b.ToolUseID, Text: ContentText(b.Content), IsError: b.IsError})
		}
	}
	return evs
}

// ContentText flattens a tool result's content: a string, or a list of
// blocks whose text parts are joined.
func ContentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Close implements Parser.
func (p *StreamJSON) Close() []Event { return nil }
