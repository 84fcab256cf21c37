package proxy

import (
	"net/http"

	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

// listModels answers GET /v1/models in the shape the asking SDK expects:
// Anthropic's when the request carries Anthropic's headers, OpenAI's
// otherwise.
func (p *Proxy) listModels(w http.ResponseWriter, r *http.Request) {
	var j wire.W
	if r.Header.Get("anthropic-version") != "" || r.Header.Get("x-api-key") != "" {
		j.Obj().KArr("data")
		for _, n := range p.names {
			j.Obj().KStr("type", "model").KStr("id", n).KStr("display_name", n).KStr("created_at", "1970-01-01T00:00:00Z").End()
		}
		j.End().KBool("has_more", false)
		if len(p.names) > 0 {
			j.KStr("first_id", p.names[0]).KStr("last_id", p.names[len(p.names)-1])
		}
		j.End()
	} else {
		j.Obj().KStr("object", "list").KArr("data")
		for _, n := range p.names {
			j.Obj().KStr("id", n).KStr("object", "model").KInt("created", 0).KStr("owned_by", "agent2env").End()
		}
		j.End().End()
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(j.B)
}

// listGeminiModels answers GET /v1beta/models.
func (p *Proxy) listGeminiModels(w http.ResponseWriter, r *http.Request) {
	var j wire.W
	j.Obj().KArr("models")
	for _, n := range p.names {
		j.Obj().KStr("name", "models/"+n).KStr("displayName", n).
			KArr("supportedGenerationMethods").Str("generateContent").Str("streamGenerateContent").Str("countTokens").End().End()
	}
	j.End().End()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(j.B)
}
