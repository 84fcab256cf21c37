// Package anthropic is the codec of Anthropic's Messages API
// (POST /v1/messages, with streaming, and /v1/messages/count_tokens).
//
// It is the format closest to the canonical model: content blocks map to
// parts one to one. What only Anthropic has is carried knowingly: thinking
// and redacted-thinking blocks keep their signatures (sent back only to an
// Anthropic upstream, and only when signed), cache_control travels on
// system parts, blocks and tools (dropped by other formats), server tools
// and blocks the model has no place for (documents, web search results,
// MCP blocks) are opaque parts, and top-level beta fields such as
// context_management stay in Request.Extra for a same-format upstream.
package anthropic

import (
	"net/http"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

// Version is the anthropic-version header sent to upstreams that were not
// given one by the client.
const Version = "2023-06-01"

// DefaultMaxTokens is the max_tokens sent upstream when the client's
// format did not require one: Anthropic does.
const DefaultMaxTokens = 8192

// Codec is the Anthropic Messages codec. The zero value is ready.
type Codec struct{}

var (
	_ llm.Codec        = Codec{}
	_ llm.TokenCounter = Codec{}
)

// Format implements llm.Codec.
func (Codec) Format() llm.Format { return llm.FormatAnthropic }

// Upstream implements llm.Codec: base URLs are host-only, as the SDKs'.
func (Codec) Upstream(model string, stream bool) llm.Endpoint {
	return llm.Endpoint{Path: "/v1/messages", SetKey: setKey}
}

func setKey(h http.Header, key string) {
	h.Set("x-api-key", key)
	h.Del("Authorization")
	if h.Get("anthropic-version") == "" {
		h.Set("anthropic-version", Version)
	}
}

// CountPath implements llm.TokenCounter.
func (Codec) CountPath(model string) string { return "/v1/messages/count_tokens" }

// DecodeCountRequest implements llm.TokenCounter: the body is a Messages
// request without max_tokens.
func (c Codec) DecodeCountRequest(body []byte) (*llm.Request, error) {
	return c.DecodeRequest(body)
}

// EncodeCountRequest implements llm.TokenCounter.
func (Codec) EncodeCountRequest(req *llm.Request) ([]byte, error) {
	return encodeRequest(req, true), nil
}

// DecodeCountResponse implements llm.TokenCounter.
func (Codec) DecodeCountResponse(body []byte) (int, error) {
	var r struct {
		InputTokens *int `json:"input_tokens"`
	}
	if err := unmarshal(body, &r); err != nil || r.InputTokens == nil {
		return 0, llm.Errorf(llm.ErrorUpstream, "decode anthropic count_tokens response: no input_tokens")
	}
	return *r.InputTokens, nil
}

// EncodeCountResponse implements llm.TokenCounter.
func (Codec) EncodeCountResponse(tokens int) []byte {
	var j wire.W
	return j.Obj().KInt("input_tokens", tokens).End().B
}

var errorTypes = map[llm.ErrorKind]string{
	llm.ErrorInvalidRequest: "invalid_request_error",
	llm.ErrorAuthentication: "authentication_error",
	llm.ErrorPermission:     "permission_error",
	llm.ErrorNotFound:       "not_found_error",
	llm.ErrorTooLarge:       "request_too_large",
	llm.ErrorRateLimit:      "rate_limit_error",
	llm.ErrorInternal:       "api_error",
	llm.ErrorUpstream:       "api_error",
	llm.ErrorOverloaded:     "overloaded_error",
	llm.ErrorTimeout:        "timeout_error",
}

// EncodeError implements llm.Codec. Overload is 529, as Anthropic says it.
func (Codec) EncodeError(e *llm.Error) (int, []byte) {
	status := e.HTTPStatus()
	if e.Kind == llm.ErrorOverloaded && status == http.StatusServiceUnavailable {
		status = 529
	}
	return status, errorBody(e)
}

func errorBody(e *llm.Error) []byte {
	typ := errorTypes[e.Kind]
	if typ == "" {
		typ = "api_error"
	}
	var j wire.W
	j.Obj().KStr("type", "error").KObj("error").KStr("type", typ).KStr("message", e.Message).End().End()
	return j.B
}

// DecodeError implements llm.Codec.
func (Codec) DecodeError(status int, body []byte) *llm.Error {
	var r struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e := &llm.Error{Kind: llm.KindOfStatus(status), Status: status}
	if err := unmarshal(body, &r); err == nil && r.Error.Message != "" {
		e.Message, e.Code = r.Error.Message, r.Error.Type
		for k, t := range errorTypes {
			if t == r.Error.Type && k != llm.ErrorUpstream {
				e.Kind = k
			}
		}
	} else {
		e.Message = "upstream answered " + http.StatusText(status) + ": " + string(truncate(body, 512))
	}
	return e
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
