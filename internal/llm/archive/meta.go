package archive

import (
	"net/http"
	"strconv"
	"time"

	"github.com/agent2env/agent2env/internal/llm/internal/redact"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
	"github.com/agent2env/agent2env/internal/store"
)

// exMeta is an index record as the log keeps it (in Begin and End
// records): short names, zero values left out.
type exMeta struct {
	ID              string `json:"id"`
	SandboxID       string `json:"sb,omitempty"`
	RunID           string `json:"run,omitempty"`
	KeyID           string `json:"key,omitempty"`
	Tenant          string `json:"t,omitempty"`
	Inbound         string `json:"in,omitempty"`
	Method          string `json:"m,omitempty"`
	Path            string `json:"p,omitempty"`
	Model           string `json:"model,omitempty"`
	Provider        string `json:"prov,omitempty"`
	UpstreamModel   string `json:"up,omitempty"`
	Stream          bool   `json:"st,omitempty"`
	Passthrough     bool   `json:"pass,omitempty"`
	Status          int    `json:"status,omitempty"`
	State           string `json:"state,omitempty"`
	Error           string `json:"err,omitempty"`
	InputTokens     int    `json:"it,omitempty"`
	OutputTokens    int    `json:"ot,omitempty"`
	CachedTokens    int    `json:"ct,omitempty"`
	ReasoningTokens int    `json:"rt,omitempty"`
	Attempts        int    `json:"att,omitempty"`
	FirstByte       int64  `json:"fb,omitempty"` // µs
	Duration        int64  `json:"d,omitempty"`  // µs
	CreatedAt       int64  `json:"at"`           // Unix µs
	RequestBytes    int64  `json:"rqb,omitempty"`
	ResponseBytes   int64  `json:"rsb,omitempty"`
	StoredBytes     int64  `json:"sb2,omitempty"`
}

func toMeta(x *store.LLMExchange) exMeta {
	return exMeta{
		ID: x.ID, SandboxID: x.SandboxID, RunID: x.RunID, KeyID: x.KeyID, Tenant: x.Tenant, Inbound: x.Inbound, Method: x.Method, Path: x.Path,
		Model: x.Model, Provider: x.Provider, UpstreamModel: x.UpstreamModel, Stream: x.Stream, Passthrough: x.Passthrough,
		Status: x.Status, State: x.State, Error: x.Error, InputTokens: x.InputTokens, OutputTokens: x.OutputTokens,
		CachedTokens: x.CachedTokens, ReasoningTokens: x.ReasoningTokens, Attempts: x.Attempts,
		FirstByte: x.FirstByte.Microseconds(), Duration: x.Duration.Microseconds(), CreatedAt: x.CreatedAt.UnixMicro(),
		RequestBytes: x.RequestBytes, ResponseBytes: x.ResponseBytes, StoredBytes: x.StoredBytes,
	}
}

// exchange is the index record m keeps, its path, model and error
// redacted again (a log written before redaction failed closed may hold
// credentials).
func (m *exMeta) exchange() *store.LLMExchange {
	return &store.LLMExchange{
		ID: m.ID, SandboxID: m.SandboxID, RunID: m.RunID, KeyID: m.KeyID, Tenant: m.Tenant, Inbound: m.Inbound, Method: m.Method,
		Path: redact.URL(m.Path), Model: redact.URL(m.Model), Provider: m.Provider, UpstreamModel: m.UpstreamModel, Stream: m.Stream,
		Passthrough: m.Passthrough, Status: m.Status, State: m.State, Error: redact.Text(m.Error), InputTokens: m.InputTokens,
		OutputTokens: m.OutputTokens, CachedTokens: m.CachedTokens, ReasoningTokens: m.ReasoningTokens, Attempts: m.Attempts,
		FirstByte: time.Duration(m.FirstByte) * time.Microsecond, Duration: time.Duration(m.Duration) * time.Microsecond,
		CreatedAt: time.UnixMicro(m.CreatedAt).UTC(), RequestBytes: m.RequestBytes, ResponseBytes: m.ResponseBytes,
		StoredBytes: m.StoredBytes,
	}
}

// appendExMeta appends what marshal(toMeta(x)) would, x's path, model and
// error redacted, without the reflection: it is written twice per exchange, on
// the request's goroutine.
func appendExMeta(dst []byte, x *store.LLMExchange) []byte {
	m := toMeta(x)
	dst = wire.AppendString(append(dst, `{"id":`...), m.ID)
	str := func(key, v string) {
		if v != "" {
			dst = wire.AppendString(append(append(append(dst, `,"`...), key...), `":`...), v)
		}
	}
	num := func(key string, v int64) {
		if v != 0 {
			dst = strconv.AppendInt(append(append(append(dst, `,"`...), key...), `":`...), v, 10)
		}
	}
	yes := func(key string, v bool) {
		if v {
			dst = append(append(append(dst, `,"`...), key...), `":true`...)
		}
	}
	str("sb", m.SandboxID)
	str("run", m.RunID)
	str("key", m.KeyID)
	str("t", m.Tenant)
	str("in", m.Inbound)
	str("m", m.Method)
	str("p", redact.URL(m.Path))
	str("model", redact.URL(m.Model))
	str("prov", m.Provider)
	str("up", m.UpstreamModel)
	yes("st", m.Stream)
	yes("pass", m.Passthrough)
	num("status", int64(m.Status))
	str("state", m.State)
	str("err", redact.Text(m.Error))
	num("it", int64(m.InputTokens))
	num("ot", int64(m.OutputTokens))
	num("ct", int64(m.CachedTokens))
	num("rt", int64(m.ReasoningTokens))
	num("att", int64(m.Attempts))
	num("fb", m.FirstByte)
	num("d", m.Duration)
	dst = strconv.AppendInt(append(dst, `,"at":`...), m.CreatedAt, 10)
	num("rqb", m.RequestBytes)
	num("rsb", m.ResponseBytes)
	num("sb2", m.StoredBytes)
	return append(dst, '}')
}

// appendBeginMeta appends what marshal(beginMeta{toMeta(x), redact.Header(h)})
// would, x redacted as appendExMeta does.
func appendBeginMeta(dst []byte, x *store.LLMExchange, h http.Header) []byte {
	dst = appendExMeta(append(dst, `{"x":`...), x)
	// The header as a request record's meta has it: {"h":{...}}, or {}.
	start := len(dst)
	dst = appendHTTPMeta(dst, "", "", 0, h)
	if len(dst)-start == 2 { // {}
		return append(dst[:start], '}')
	}
	dst[start] = ','
	return dst
}
