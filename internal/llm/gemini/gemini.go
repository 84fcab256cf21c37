// Package gemini is the codec of Google's Gemini API: generateContent,
// streamGenerateContent (?alt=sse) and countTokens under
// /v1beta/models/{model}, as the google-genai SDKs and gemini-cli call it.
//
// The model and streaming are in the URL, not the body: the caller fills
// Request.Model and Request.Stream. Function calls may have no ids: the
// decoder gives such calls ids from their position and matches responses
// to them by name, so that formats which need ids can be used upstream.
// Function arguments are objects and are not streamed: a canonical stream's
// argument pieces are gathered and sent as one functionCall part when the
// block ends. Tool results are function responses: {"output": text}, or
// {"error": text} for errors. Thought signatures (on any part) are kept and
// sent back only to a Gemini upstream; thoughts are parts with
// thought: true. Function declarations go upstream as parametersJsonSchema;
// OpenAPI-style parameters from clients are converted to JSON Schema.
// Only camelCase field names are read (as the SDKs send them).
package gemini

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

// Codec is the Gemini codec. The zero value is ready.
type Codec struct{}

var (
	_ llm.Codec        = Codec{}
	_ llm.TokenCounter = Codec{}
)

// Format implements llm.Codec.
func (Codec) Format() llm.Format { return llm.FormatGemini }

// Upstream implements llm.Codec: base URLs are host-only, as the SDKs'.
func (Codec) Upstream(model string, stream bool) llm.Endpoint {
	path := "/v1beta/models/" + url.PathEscape(model)
	if stream {
		path += ":streamGenerateContent?alt=sse"
	} else {
		path += ":generateContent"
	}
	return llm.Endpoint{Path: path, SetKey: setKey}
}

func setKey(h http.Header, key string) {
	h.Del("Authorization")
	h.Set("x-goog-api-key", key)
}

// CountPath implements llm.TokenCounter.
func (Codec) CountPath(model string) string {
	return "/v1beta/models/" + url.PathEscape(model) + ":countTokens"
}

// DecodeCountRequest implements llm.TokenCounter: contents alone, or a
// whole generateContentRequest.
func (c Codec) DecodeCountRequest(body []byte) (*llm.Request, error) {
	var r struct {
		GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, llm.Invalid("decode gemini countTokens request: %v", err)
	}
	if len(r.GenerateContentRequest) > 0 {
		body = r.GenerateContentRequest
	}
	return c.DecodeRequest(body)
}

// EncodeCountRequest implements llm.TokenCounter.
func (Codec) EncodeCountRequest(req *llm.Request) ([]byte, error) {
	var j wire.W
	j.Obj().KObj("generateContentRequest").KStr("model", "models/"+req.Model)
	writeRequestBody(&j, req, true)
	return j.End().End().B, nil
}

// DecodeCountResponse implements llm.TokenCounter.
func (Codec) DecodeCountResponse(body []byte) (int, error) {
	var r struct {
		TotalTokens *int `json:"totalTokens"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.TotalTokens == nil {
		return 0, llm.Errorf(llm.ErrorUpstream, "decode gemini countTokens response: no totalTokens")
	}
	return *r.TotalTokens, nil
}

// EncodeCountResponse implements llm.TokenCounter.
func (Codec) EncodeCountResponse(tokens int) []byte {
	var j wire.W
	return j.Obj().KInt("totalTokens", tokens).End().B
}

var statuses = map[llm.ErrorKind]string{
	llm.ErrorInvalidRequest: "INVALID_ARGUMENT",
	llm.ErrorAuthentication: "UNAUTHENTICATED",
	llm.ErrorPermission:     "PERMISSION_DENIED",
	llm.ErrorNotFound:       "NOT_FOUND",
	llm.ErrorTooLarge:       "INVALID_ARGUMENT",
	llm.ErrorRateLimit:      "RESOURCE_EXHAUSTED",
	llm.ErrorInternal:       "INTERNAL",
	llm.ErrorUpstream:       "INTERNAL",
	llm.ErrorOverloaded:     "UNAVAILABLE",
	llm.ErrorTimeout:        "DEADLINE_EXCEEDED",
}

// EncodeError implements llm.Codec.
func (Codec) EncodeError(e *llm.Error) (int, []byte) {
	status := e.HTTPStatus()
	return status, errorBody(e, status)
}

func errorBody(e *llm.Error, status int) []byte {
	var j wire.W
	j.Obj().KObj("error").KInt("code", status).KStr("message", e.Message).KStr("status", statuses[e.Kind]).End().End()
	return j.B
}

type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
}

// DecodeError implements llm.Codec.
func (Codec) DecodeError(status int, body []byte) *llm.Error {
	var r struct {
		Error *apiError `json:"error"`
	}
	e := &llm.Error{Kind: llm.KindOfStatus(status), Status: status}
	if err := json.Unmarshal(body, &r); err == nil && r.Error != nil && r.Error.Message != "" {
		e.Message, e.Code = r.Error.Message, r.Error.Status
	} else {
		if len(body) > 512 {
			body = body[:512]
		}
		e.Message = "upstream answered " + http.StatusText(status) + ": " + string(body)
	}
	return e
}

func stopReason(s string, calls bool) llm.StopReason {
	switch s {
	case "":
		return ""
	case "MAX_TOKENS":
		return llm.StopMaxTokens
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return llm.StopContentFilter
	}
	if calls {
		return llm.StopToolUse
	}
	return llm.StopEndTurn
}

func finishReason(r llm.StopReason) string {
	switch r {
	case llm.StopMaxTokens:
		return "MAX_TOKENS"
	case llm.StopContentFilter, llm.StopRefusal:
		return "SAFETY"
	}
	return "STOP"
}

type usageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
}

// canonical converts Gemini's counts, whose candidates exclude thoughts.
func (u *usageMetadata) canonical() llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	return llm.Usage{
		InputTokens:     u.PromptTokenCount + u.ToolUsePromptTokenCount,
		OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CachedTokens:    u.CachedContentTokenCount,
		ReasoningTokens: u.ThoughtsTokenCount,
	}
}

func writeUsage(j *wire.W, u llm.Usage) {
	j.KObj("usageMetadata").KInt("promptTokenCount", u.InputTokens).
		KInt("candidatesTokenCount", max(0, u.OutputTokens-u.ReasoningTokens)).
		KInt("totalTokenCount", u.InputTokens+u.OutputTokens).
		KIntOmit("cachedContentTokenCount", u.CachedTokens).
		KIntOmit("thoughtsTokenCount", u.ReasoningTokens).End()
}
