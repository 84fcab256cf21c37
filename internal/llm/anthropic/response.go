package anthropic

import (
	"encoding/json"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

type response struct {
	ID           string `json:"id"`
	Type         string `json:"type"`
	Model        string `json:"model"`
	Content      blocks `json:"content"`
	StopReason   string `json:"stop_reason"`
	StopSequence string `json:"stop_sequence"`
	Usage        usage  `json:"usage"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// canonical converts Anthropic's counts, where input_tokens excludes the
// cache, to the canonical ones.
func (u usage) canonical() llm.Usage {
	return llm.Usage{
		InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		OutputTokens:     u.OutputTokens,
		CachedTokens:     u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

func writeUsage(j *wire.W, u llm.Usage) {
	j.KObj("usage").KInt("input_tokens", max(0, u.InputTokens-u.CachedTokens-u.CacheWriteTokens)).
		KInt("output_tokens", u.OutputTokens).
		KInt("cache_creation_input_tokens", u.CacheWriteTokens).
		KInt("cache_read_input_tokens", u.CachedTokens).End()
}

func stopReason(s string) llm.StopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return llm.StopMaxTokens
	case "stop_sequence":
		return llm.StopSequence
	case "tool_use":
		return llm.StopToolUse
	case "pause_turn":
		return llm.StopPauseTurn
	case "refusal":
		return llm.StopRefusal
	case "":
		return ""
	}
	return llm.StopEndTurn
}

func writeStopReason(j *wire.W, r llm.StopReason) {
	switch r {
	case "":
		j.Key("stop_reason").Null()
	case llm.StopContentFilter:
		j.KStr("stop_reason", "refusal")
	case llm.StopEndTurn, llm.StopMaxTokens, llm.StopSequence, llm.StopToolUse, llm.StopPauseTurn, llm.StopRefusal:
		j.KStr("stop_reason", string(r))
	default:
		j.KStr("stop_reason", "end_turn")
	}
}

// DecodeResponse implements llm.Codec.
func (Codec) DecodeResponse(body []byte) (*llm.Response, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, llm.Errorf(llm.ErrorUpstream, "decode anthropic response: %v", err)
	}
	if r.Type == "error" {
		return nil, Codec{}.DecodeError(500, body)
	}
	return &llm.Response{
		ID: r.ID, Model: r.Model, Content: decodeBlocks(r.Content),
		StopReason: stopReason(r.StopReason), StopSequence: r.StopSequence, Usage: r.Usage.canonical(),
	}, nil
}

// EncodeResponse implements llm.Codec.
func (Codec) EncodeResponse(req *llm.Request, resp *llm.Response) ([]byte, error) {
	var j wire.W
	j.B = make([]byte, 0, 512)
	j.Obj().KStr("id", messageID(resp.ID)).KStr("type", "message").KStr("role", "assistant").KStr("model", resp.Model)
	j.KArr("content")
	for i := range resp.Content {
		writeBlock(&j, &resp.Content[i], true)
	}
	j.End()
	writeStopReason(&j, resp.StopReason)
	writeStopSequence(&j, resp.StopSequence)
	writeUsage(&j, resp.Usage)
	return j.End().B, nil
}

func writeStopSequence(j *wire.W, s string) {
	if s == "" {
		j.Key("stop_sequence").Null()
	} else {
		j.KStr("stop_sequence", s)
	}
}

func messageID(id string) string {
	if id == "" {
		return llm.NewID("msg_")
	}
	return id
}
