// Package responses is the codec of OpenAI's Responses API
// (POST /v1/responses, with streaming), which codex speaks.
//
// A conversation is a list of items: messages, function calls and their
// outputs, and reasoning items (a summary and encrypted content, kept as
// the thinking part's text and signature and sent back only to a Responses
// upstream). Function tools inside a namespace tool (codex's MCP servers
// and multi-agent tools) become canonical tools with a Namespace, which
// other formats see flattened as namespace__name; calls coming back under
// the flattened name are given their namespace again from the client's own
// tools. Built-in tools (web_search, file_search, custom and the like) and
// items the model has no place for are opaque: kept for a Responses
// upstream, left out for the others. Responses has no stop sequences and
// no top_k: they are dropped. Stateful features (previous_response_id,
// store) cannot be translated and pass only to a Responses upstream.
package responses

import (
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
	"github.com/agent2env/agent2env/internal/llm/openai"
)

// Codec is the Responses codec. The zero value is ready.
type Codec struct{}

var _ llm.Codec = Codec{}

// Format implements llm.Codec.
func (Codec) Format() llm.Format { return llm.FormatResponses }

// Upstream implements llm.Codec: base URLs end in /v1, as the SDKs'.
func (Codec) Upstream(model string, stream bool) llm.Endpoint {
	return llm.Endpoint{Path: "/responses", SetKey: openai.SetBearer}
}

// EncodeError implements llm.Codec: the same error object as Chat
// Completions.
func (Codec) EncodeError(e *llm.Error) (int, []byte) { return e.HTTPStatus(), openai.ErrorBody(e) }

// DecodeError implements llm.Codec.
func (Codec) DecodeError(status int, body []byte) *llm.Error {
	return openai.DecodeErrorBody(status, body)
}

type usage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (u *usage) canonical() llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	return llm.Usage{
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedTokens: u.InputTokensDetails.CachedTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens,
	}
}

func writeUsage(j *wire.W, u llm.Usage) {
	j.KObj("usage").KInt("input_tokens", u.InputTokens).
		KObj("input_tokens_details").KInt("cached_tokens", u.CachedTokens).End().
		KInt("output_tokens", u.OutputTokens).
		KObj("output_tokens_details").KInt("reasoning_tokens", u.ReasoningTokens).End().
		KInt("total_tokens", u.InputTokens+u.OutputTokens).End()
}

// status is a response's status and incomplete reason for a stop reason.
func status(r llm.StopReason) (string, string) {
	switch r {
	case llm.StopMaxTokens:
		return "incomplete", "max_output_tokens"
	case llm.StopContentFilter:
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

func stopReason(status, incomplete string, calls bool) llm.StopReason {
	if status == "incomplete" {
		if incomplete == "content_filter" {
			return llm.StopContentFilter
		}
		return llm.StopMaxTokens
	}
	if calls {
		return llm.StopToolUse
	}
	return llm.StopEndTurn
}

func responseID(id string) string {
	if id == "" {
		return llm.NewID("resp_")
	}
	return id
}
