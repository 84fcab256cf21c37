// Package openai is the codec of OpenAI's Chat Completions API
// (POST /v1/chat/completions, with streaming), which every
// OpenAI-compatible server speaks (vLLM, Ollama, DeepSeek, Qwen…).
//
// Chat Completions has no content blocks on the assistant side: a reply is
// one text, an optional reasoning text (reasoning_content, as DeepSeek and
// vLLM send it; also read as "reasoning") and tool calls, so adjacent
// canonical text parts are joined. Tool results are messages of role
// "tool", which the codec splits out of and folds back into user messages.
// Reasoning is asked for with reasoning_effort. Chat Completions carries no
// thinking signatures, no cache_control and no error flag on tool results:
// those are dropped. Requests go upstream with max_tokens, which every
// compatible server accepts.
package openai

import (
	"encoding/json"
	"net/http"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

// Codec is the Chat Completions codec. The zero value is ready.
type Codec struct{}

var _ llm.Codec = Codec{}

// Format implements llm.Codec.
func (Codec) Format() llm.Format { return llm.FormatOpenAI }

// Upstream implements llm.Codec: base URLs end in /v1, as the SDKs'.
func (Codec) Upstream(model string, stream bool) llm.Endpoint {
	return llm.Endpoint{Path: "/chat/completions", SetKey: SetBearer}
}

// SetBearer presents key as a bearer token, as the OpenAI APIs expect.
func SetBearer(h http.Header, key string) {
	h.Del("x-api-key")
	h.Set("Authorization", "Bearer "+key)
}

var errorTypes = map[llm.ErrorKind]string{
	llm.ErrorInvalidRequest: "invalid_request_error",
	llm.ErrorAuthentication: "authentication_error",
	llm.ErrorPermission:     "permission_error",
	llm.ErrorNotFound:       "not_found_error",
	llm.ErrorTooLarge:       "invalid_request_error",
	llm.ErrorRateLimit:      "rate_limit_error",
	llm.ErrorInternal:       "server_error",
	llm.ErrorUpstream:       "server_error",
	llm.ErrorOverloaded:     "server_error",
	llm.ErrorTimeout:        "timeout_error",
}

// EncodeError implements llm.Codec.
func (Codec) EncodeError(e *llm.Error) (int, []byte) { return e.HTTPStatus(), ErrorBody(e) }

// ErrorBody is the OpenAI error object, shared with the Responses codec.
func ErrorBody(e *llm.Error) []byte {
	var j wire.W
	j.Obj().KObj("error").KStr("message", e.Message).KStr("type", errorTypes[e.Kind]).Key("param").Null()
	if e.Code != "" {
		j.KStr("code", e.Code)
	} else {
		j.Key("code").Null()
	}
	return j.End().End().B
}

type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// DecodeError implements llm.Codec.
func (Codec) DecodeError(status int, body []byte) *llm.Error { return DecodeErrorBody(status, body) }

// DecodeErrorBody reads an OpenAI error object, shared with the Responses
// codec.
func DecodeErrorBody(status int, body []byte) *llm.Error {
	var r struct {
		Error *errorObject `json:"error"`
	}
	e := &llm.Error{Kind: llm.KindOfStatus(status), Status: status}
	if err := json.Unmarshal(body, &r); err == nil && r.Error != nil && r.Error.Message != "" {
		e.Message = r.Error.Message
		var code string
		if json.Unmarshal(r.Error.Code, &code) == nil {
			e.Code = code
		}
	} else {
		if len(body) > 512 {
			body = body[:512]
		}
		e.Message = "upstream answered " + http.StatusText(status) + ": " + string(body)
	}
	return e
}

func stopReason(s string) llm.StopReason {
	switch s {
	case "":
		return ""
	case "length":
		return llm.StopMaxTokens
	case "tool_calls", "function_call":
		return llm.StopToolUse
	case "content_filter":
		return llm.StopContentFilter
	}
	return llm.StopEndTurn
}

func finishReason(r llm.StopReason) string {
	switch r {
	case llm.StopMaxTokens:
		return "length"
	case llm.StopToolUse:
		return "tool_calls"
	case llm.StopContentFilter, llm.StopRefusal:
		return "content_filter"
	}
	return "stop"
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"` // DeepSeek
}

func (u *usage) canonical() llm.Usage {
	cached := u.PromptTokensDetails.CachedTokens
	if cached == 0 {
		cached = u.PromptCacheHitTokens
	}
	return llm.Usage{
		InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CachedTokens: cached, ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens,
	}
}

func writeUsage(j *wire.W, u llm.Usage) {
	j.KObj("usage").KInt("prompt_tokens", u.InputTokens).KInt("completion_tokens", u.OutputTokens).
		KInt("total_tokens", u.InputTokens+u.OutputTokens).
		KObj("prompt_tokens_details").KInt("cached_tokens", u.CachedTokens).End().
		KObj("completion_tokens_details").KInt("reasoning_tokens", u.ReasoningTokens).End().End()
}
