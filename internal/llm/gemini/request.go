package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

type request struct {
	Contents          []content `json:"contents"`
	SystemInstruction *content  `json:"systemInstruction"`
	Tools             []tool    `json:"tools"`
	ToolConfig        *struct {
		FunctionCallingConfig *struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig *generationConfig `json:"generationConfig"`
}

var knownRequest = map[string]bool{
	"contents": true, "systemInstruction": true, "tools": true, "toolConfig": true, "generationConfig": true,
	"model": true,
}

type generationConfig struct {
	Temperature     *float64 `json:"temperature"`
	TopP            *float64 `json:"topP"`
	TopK            *float64 `json:"topK"`
	MaxOutputTokens int      `json:"maxOutputTokens"`
	StopSequences   []string `json:"stopSequences"`
	ThinkingConfig  *struct {
		IncludeThoughts bool   `json:"includeThoughts"`
		ThinkingBudget  *int   `json:"thinkingBudget"`
		ThinkingLevel   string `json:"thinkingLevel"`
	} `json:"thinkingConfig"`
}

type content struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	InlineData       *struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	} `json:"inlineData"`
	FileData *struct {
		MimeType string `json:"mimeType"`
		FileURI  string `json:"fileUri"`
	} `json:"fileData"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// known reports whether the model has a place for p: text (possibly only
// a signature), calls, responses and images. Code execution, other media
// and whatever comes next are Gemini's alone.
func (p *part) known() bool {
	switch {
	case p.FunctionCall != nil, p.FunctionResponse != nil:
		return true
	case p.InlineData != nil:
		return strings.HasPrefix(p.InlineData.MimeType, "image/")
	case p.FileData != nil:
		return strings.HasPrefix(p.FileData.MimeType, "image/")
	}
	return p.Text != nil || p.ThoughtSignature != ""
}

func (p *part) text() string {
	if p.Text == nil {
		return ""
	}
	return *p.Text
}

type tool struct {
	FunctionDeclarations []struct {
		Name                 string          `json:"name"`
		Description          string          `json:"description"`
		Parameters           json.RawMessage `json:"parameters"`
		ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
	} `json:"functionDeclarations"`
}

// DecodeRequest implements llm.Codec. Model and Stream come from the URL.
func (Codec) DecodeRequest(body []byte) (*llm.Request, error) {
	var r request
	if err := llm.DecodeRequestJSON(body, &r, "gemini generateContent"); err != nil {
		return nil, err
	}
	req := &llm.Request{StreamUsage: true}
	if r.SystemInstruction != nil {
		for _, p := range r.SystemInstruction.Parts {
			if p.text() != "" {
				req.System = append(req.System, llm.Text(p.text()))
			}
		}
	}
	req.Messages = make([]llm.Message, 0, len(r.Contents))
	for i, c := range r.Contents {
		role := llm.RoleUser
		switch c.Role {
		case "model":
			role = llm.RoleAssistant
		case "user", "", "function", "tool":
		default:
			return nil, llm.Invalid("decode gemini generateContent request: contents[%d]: unknown role %q", i, c.Role)
		}
		parts, err := decodeParts(c.Parts, func(j int) json.RawMessage { return wire.At(body, "contents", i, "parts", j) })
		if err != nil {
			return nil, llm.Invalid("decode gemini generateContent request: contents[%d]: %v", i, err)
		}
		req.Messages = append(req.Messages, llm.Message{Role: role, Parts: parts})
	}
	FillToolIDs(req.Messages)
	for i, t := range r.Tools {
		if len(t.FunctionDeclarations) == 0 { // googleSearch, codeExecution…
			req.Tools = append(req.Tools, llm.Tool{Raw: wire.At(body, "tools", i), Origin: llm.FormatGemini})
			continue
		}
		for _, f := range t.FunctionDeclarations {
			schema := f.ParametersJSONSchema
			if len(schema) == 0 && len(f.Parameters) > 0 {
				schema = jsonSchema(f.Parameters)
			}
			req.Tools = append(req.Tools, llm.Tool{Name: f.Name, Description: f.Description, Parameters: schema})
		}
	}
	if tc := r.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil {
		fc := tc.FunctionCallingConfig
		switch fc.Mode {
		case "AUTO", "VALIDATED":
			req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceAuto}
		case "NONE":
			req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceNone}
		case "ANY":
			req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceRequired}
			if len(fc.AllowedFunctionNames) == 1 {
				req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: fc.AllowedFunctionNames[0]}
			}
		}
	}
	if g := r.GenerationConfig; g != nil {
		req.MaxTokens, req.Temperature, req.TopP, req.Stop = g.MaxOutputTokens, g.Temperature, g.TopP, g.StopSequences
		if g.TopK != nil {
			k := int(*g.TopK)
			req.TopK = &k
		}
		if tc := g.ThinkingConfig; tc != nil {
			switch {
			case tc.ThinkingBudget != nil && *tc.ThinkingBudget == 0:
				req.Reasoning = &llm.Reasoning{Disabled: true}
			case tc.ThinkingBudget != nil && *tc.ThinkingBudget > 0:
				req.Reasoning = &llm.Reasoning{BudgetTokens: *tc.ThinkingBudget}
			case tc.ThinkingLevel != "":
				req.Reasoning = &llm.Reasoning{Effort: strings.ToLower(tc.ThinkingLevel)}
			}
		}
	}
	extra, err := wire.Extra(llm.FormatGemini, body, func(k string) bool { return knownRequest[k] })
	if err != nil {
		return nil, llm.Invalid("decode gemini generateContent request: %v", err)
	}
	req.Extra = extra
	return req, nil
}

// decodeParts converts parts; raw finds the j-th part's JSON, for the
// parts the model has no place for.
func decodeParts(ps []part, raw func(j int) json.RawMessage) ([]llm.Part, error) {
	out := make([]llm.Part, 0, len(ps))
	for i := range ps {
		p := &ps[i]
		var c llm.Part
		switch {
		case !p.known():
			c = llm.Part{Type: llm.PartOpaque, Raw: raw(i)}
		case p.FunctionCall != nil:
			args := string(bytes.TrimSpace(p.FunctionCall.Args))
			if args == "" || args == "null" {
				args = "{}"
			}
			c = llm.Part{Type: llm.PartToolCall, ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Arguments: args}
		case p.FunctionResponse != nil:
			c = resultPart(p.FunctionResponse.ID, p.FunctionResponse.Name, p.FunctionResponse.Response)
		case p.InlineData != nil:
			c = llm.Part{Type: llm.PartImage, MediaType: p.InlineData.MimeType, Data: p.InlineData.Data}
		case p.FileData != nil:
			c = llm.Part{Type: llm.PartImage, MediaType: p.FileData.MimeType, URL: p.FileData.FileURI}
		case p.Thought:
			c = llm.Part{Type: llm.PartThinking, Text: p.text()}
		default:
			if p.text() == "" && p.ThoughtSignature == "" {
				continue // an empty part says nothing
			}
			c = llm.Text(p.text())
		}
		if p.ThoughtSignature != "" || c.Type == llm.PartThinking || c.Type == llm.PartOpaque {
			c.Signature, c.Origin = p.ThoughtSignature, llm.FormatGemini
		}
		out = append(out, c)
	}
	return out, nil
}

// resultPart reads a function response: {"output": text} and
// {"error": text} are the text; anything else is shown as its JSON.
func resultPart(id, name string, resp json.RawMessage) llm.Part {
	p := llm.Part{Type: llm.PartToolResult, ID: id, Name: name}
	var m map[string]json.RawMessage
	if json.Unmarshal(resp, &m) == nil && len(m) == 1 {
		for k, v := range m {
			var s string
			if (k == "output" || k == "error") && json.Unmarshal(v, &s) == nil {
				p.Content, p.IsError = []llm.Part{llm.Text(s)}, k == "error"
				return p
			}
		}
	}
	text := string(resp)
	if text == "" {
		text = "{}"
	}
	p.Content = []llm.Part{llm.Text(text)}
	return p
}

// FillToolIDs gives tool calls without ids an id from their position
// (call_<message>_<part>), and tool results without ids the id of the
// oldest unanswered call of their name. Ids are deterministic, so a
// replayed conversation gets the same ones.
func FillToolIDs(msgs []llm.Message) {
	var pending []*llm.Part
	for mi := range msgs {
		for pi := range msgs[mi].Parts {
			p := &msgs[mi].Parts[pi]
			switch p.Type {
			case llm.PartToolCall:
				if p.ID == "" {
					p.ID = fmt.Sprintf("call_%d_%d", mi, pi)
				}
				pending = append(pending, p)
			case llm.PartToolResult:
				for k, call := range pending {
					if (p.ID == "" && call.Name == p.Name) || (p.ID != "" && call.ID == p.ID) {
						if p.ID == "" {
							p.ID = call.ID
						}
						if p.Name == "" {
							p.Name = call.Name
						}
						pending = append(pending[:k], pending[k+1:]...)
						break
					}
				}
			}
		}
	}
}

// jsonSchema converts an OpenAPI-style Gemini schema (types in capitals)
// to JSON Schema.
func jsonSchema(raw json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, sub := range x {
				if s, ok := sub.(string); ok && k == "type" {
					x[k] = strings.ToLower(s)
				} else {
					walk(sub)
				}
			}
		case []any:
			for _, sub := range x {
				walk(sub)
			}
		}
	}
	walk(v)
	out, err := wire.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// EncodeRequest implements llm.Codec. The body has no model: it is in the
// URL (Upstream).
func (Codec) EncodeRequest(req *llm.Request) ([]byte, error) {
	var j wire.W
	j.B = make([]byte, 0, 1024)
	j.Obj()
	writeRequestBody(&j, req, false)
	return j.End().B, nil
}

func writeRequestBody(j *wire.W, req *llm.Request, count bool) {
	// Tool results need the name of the call they answer.
	names := map[string]string{}
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			if p.Type == llm.PartToolCall {
				names[p.ID] = llm.QualifiedName(p.Namespace, p.Name)
			}
		}
	}
	j.KArr("contents")
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem {
			continue
		}
		role := "user"
		if m.Role == llm.RoleAssistant {
			role = "model"
		}
		if !anyPart(m.Parts) {
			continue
		}
		j.Obj().KStr("role", role).KArr("parts")
		for i := range m.Parts {
			writePart(j, &m.Parts[i], names)
		}
		j.End().End()
	}
	j.End()
	var system []string
	for _, p := range req.System {
		if p.Type == llm.PartText && p.Text != "" {
			system = append(system, p.Text)
		}
	}
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem {
			for _, p := range m.Parts {
				if p.Type == llm.PartText && p.Text != "" {
					system = append(system, p.Text)
				}
			}
		}
	}
	if len(system) > 0 {
		j.KObj("systemInstruction").KArr("parts")
		for _, s := range system {
			j.Obj().KStr("text", s).End()
		}
		j.End().End()
	}
	writeTools(j, req)
	if count {
		return
	}
	g := req.MaxTokens != 0 || req.Temperature != nil || req.TopP != nil || req.TopK != nil || len(req.Stop) > 0 || req.Reasoning != nil
	if g {
		j.KObj("generationConfig").KIntOmit("maxOutputTokens", req.MaxTokens).KFloat("temperature", req.Temperature).KFloat("topP", req.TopP)
		if req.TopK != nil {
			j.KInt("topK", *req.TopK)
		}
		if len(req.Stop) > 0 {
			j.KArr("stopSequences")
			for _, s := range req.Stop {
				j.Str(s)
			}
			j.End()
		}
		if rs := req.Reasoning; rs != nil {
			j.KObj("thinkingConfig")
			switch {
			case rs.Disabled:
				j.KInt("thinkingBudget", 0)
			case rs.BudgetTokens > 0:
				j.KBool("includeThoughts", true).KInt("thinkingBudget", rs.BudgetTokens)
			default:
				j.KBool("includeThoughts", true).KInt("thinkingBudget", llm.EffortBudget(rs.Effort))
			}
			j.End()
		}
		j.End()
	}
	j.Extra(req.Extra.For(llm.FormatGemini), func(k string) bool { return knownRequest[k] })
}

func anyPart(ps []llm.Part) bool {
	for i := range ps {
		if writable(&ps[i]) {
			return true
		}
	}
	return false
}

func writable(p *llm.Part) bool {
	switch p.Type {
	case llm.PartOpaque:
		return p.Origin == llm.FormatGemini
	case llm.PartThinking:
		return p.Origin == llm.FormatGemini && (p.Text != "" || p.Signature != "")
	case llm.PartText:
		return p.Text != "" || (p.Origin == llm.FormatGemini && p.Signature != "")
	}
	return true
}

func writePart(j *wire.W, p *llm.Part, names map[string]string) {
	if !writable(p) {
		return
	}
	switch p.Type {
	case llm.PartOpaque:
		j.Raw(p.Raw)
		return
	case llm.PartText:
		j.Obj().KStr("text", p.Text)
	case llm.PartThinking:
		j.Obj().KStr("text", p.Text).KBool("thought", true)
	case llm.PartImage:
		if p.URL != "" {
			j.Obj().KObj("fileData").KStr("mimeType", imageType(p)).KStr("fileUri", p.URL).End()
		} else {
			j.Obj().KObj("inlineData").KStr("mimeType", p.MediaType).KStr("data", p.Data).End()
		}
	case llm.PartToolCall:
		j.Obj().KObj("functionCall").KStrOmit("id", p.ID).KStr("name", llm.QualifiedName(p.Namespace, p.Name)).
			KRaw("args", wire.ArgumentsObject(p.Arguments)).End()
	case llm.PartToolResult:
		name := p.Name
		if name == "" {
			name = names[p.ID]
		}
		j.Obj().KObj("functionResponse").KStrOmit("id", p.ID).KStr("name", name).KObj("response")
		key := "output"
		if p.IsError {
			key = "error"
		}
		var b strings.Builder
		for _, c := range p.Content {
			b.WriteString(c.Text)
		}
		j.KStr(key, b.String()).End().End()
	default:
		return
	}
	if p.Origin == llm.FormatGemini && p.Signature != "" {
		j.KStr("thoughtSignature", p.Signature)
	}
	j.End()
}

// imageType is an image URL's media type, guessed from its extension when
// the part does not say (Gemini requires one).
func imageType(p *llm.Part) string {
	if p.MediaType != "" {
		return p.MediaType
	}
	return GuessImageType(p.URL)
}

// GuessImageType is the media type of an image URL by its extension,
// image/jpeg when it has none known.
func GuessImageType(u string) string {
	u = strings.ToLower(u)
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	for ext, t := range map[string]string{".png": "image/png", ".gif": "image/gif", ".webp": "image/webp"} {
		if strings.HasSuffix(u, ext) {
			return t
		}
	}
	return "image/jpeg"
}

func writeTools(j *wire.W, req *llm.Request) {
	funcs, raws := 0, 0
	for _, t := range req.Tools {
		switch {
		case t.Raw == nil:
			funcs++
		case t.Origin == llm.FormatGemini:
			raws++
		}
	}
	if funcs+raws == 0 {
		return
	}
	j.KArr("tools")
	if funcs > 0 {
		j.Obj().KArr("functionDeclarations")
		for _, t := range req.Tools {
			if t.Raw == nil {
				j.Obj().KStr("name", llm.QualifiedName(t.Namespace, t.Name)).KStrOmit("description", t.Description).
					KRaw("parametersJsonSchema", t.Parameters).End()
			}
		}
		j.End().End()
	}
	for _, t := range req.Tools {
		if t.Raw != nil && t.Origin == llm.FormatGemini {
			j.Raw(t.Raw)
		}
	}
	j.End()
	if tc := req.ToolChoice; tc != nil && funcs > 0 {
		j.KObj("toolConfig").KObj("functionCallingConfig")
		switch tc.Mode {
		case llm.ToolChoiceNone:
			j.KStr("mode", "NONE")
		case llm.ToolChoiceRequired:
			j.KStr("mode", "ANY")
		case llm.ToolChoiceTool:
			j.KStr("mode", "ANY").KArr("allowedFunctionNames").Str(tc.Name).End()
		default:
			j.KStr("mode", "AUTO")
		}
		j.End().End()
	}
}
