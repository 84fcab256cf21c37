package responses

import (
	"encoding/json"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

type response struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	Output            items  `json:"output"`
	Usage             *usage `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *apiError `json:"error"`
}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// DecodeResponse implements llm.Codec.
func (Codec) DecodeResponse(body []byte) (*llm.Response, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, llm.Errorf(llm.ErrorUpstream, "decode response: %v", err)
	}
	if r.Status == "failed" || (r.Error != nil && r.Error.Message != "") {
		return nil, failure(r.Error)
	}
	return r.canonical(), nil
}

func failure(e *apiError) *llm.Error {
	out := &llm.Error{Kind: llm.ErrorUpstream, Message: "upstream response failed"}
	if e != nil {
		out.Message, out.Code = e.Message, e.Code
		switch e.Code {
		case "rate_limit_exceeded":
			out.Kind = llm.ErrorRateLimit
		case "server_error":
			out.Kind = llm.ErrorInternal
		}
	}
	return out
}

func (r *response) canonical() *llm.Response {
	var req llm.Request
	_ = decodeItems(&req, r.Output)
	resp := &llm.Response{ID: r.ID, Model: r.Model, Usage: r.Usage.canonical()}
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			resp.Content = append(resp.Content, m.Parts...)
		}
	}
	incomplete := ""
	if r.IncompleteDetails != nil {
		incomplete = r.IncompleteDetails.Reason
	}
	resp.StopReason = stopReason(r.Status, incomplete, resp.HasToolCalls())
	return resp
}

// EncodeResponse implements llm.Codec.
func (Codec) EncodeResponse(req *llm.Request, resp *llm.Response) ([]byte, error) {
	var j wire.W
	j.B = make([]byte, 0, 512)
	ns := namespaces(req)
	writeResponse(&j, resp.ID, resp.Model, resp.StopReason, func(j *wire.W) {
		for i := 0; i < len(resp.Content); i++ {
			p := &resp.Content[i]
			switch p.Type {
			case llm.PartText:
				start := i
				for i < len(resp.Content) && resp.Content[i].Type == llm.PartText {
					i++
				}
				writeMessageItem(j, "", resp.Content[start:i])
				i--
			case llm.PartToolCall:
				writeCallItem(j, "", p, ns, p.Arguments)
			case llm.PartThinking:
				writeReasoning(j, p)
			case llm.PartOpaque:
				if p.Origin == llm.FormatResponses {
					j.Raw(p.Raw)
				}
			}
		}
	}, &resp.Usage)
	return j.B, nil
}

// writeResponse writes a response object; output writes its items, and a
// nil usage means the response is still in progress.
func writeResponse(j *wire.W, id, model string, stop llm.StopReason, output func(*wire.W), u *llm.Usage) {
	st, incomplete := "in_progress", ""
	if u != nil {
		st, incomplete = status(stop)
	}
	j.Obj().KStr("id", responseID(id)).KStr("object", "response").KInt("created_at", int(time.Now().Unix())).
		KStr("status", st).Key("error").Null()
	if incomplete != "" {
		j.KObj("incomplete_details").KStr("reason", incomplete).End()
	} else {
		j.Key("incomplete_details").Null()
	}
	j.KStr("model", model).KArr("output")
	if output != nil {
		output(j)
	}
	j.End().KBool("parallel_tool_calls", true).KStr("tool_choice", "auto").KArr("tools").End()
	if u != nil {
		writeUsage(j, *u)
	} else {
		j.Key("usage").Null()
	}
	j.End()
}

func writeMessageItem(j *wire.W, id string, texts []llm.Part) {
	if id == "" {
		id = llm.NewID("msg_")
	}
	j.Obj().KStr("id", id).KStr("type", "message").KStr("status", "completed").KStr("role", "assistant").KArr("content")
	for i := range texts {
		writeTextPart(j, texts[i].Text)
	}
	j.End().End()
}

func writeTextPart(j *wire.W, text string) {
	j.Obj().KStr("type", "output_text").KStr("text", text).KArr("annotations").End().End()
}

// namespaces maps the flattened names of the client's namespaced tools
// back to namespace and name, for calls from upstreams without namespaces.
func namespaces(req *llm.Request) map[string][2]string {
	if req == nil {
		return nil
	}
	var m map[string][2]string
	for _, t := range req.Tools {
		if t.Namespace != "" {
			if m == nil {
				m = map[string][2]string{}
			}
			m[llm.QualifiedName(t.Namespace, t.Name)] = [2]string{t.Namespace, t.Name}
		}
	}
	return m
}

func callName(p *llm.Part, ns map[string][2]string) (namespace, name string) {
	if p.Namespace != "" {
		return p.Namespace, p.Name
	}
	if n, ok := ns[p.Name]; ok {
		return n[0], n[1]
	}
	return "", p.Name
}

func writeCallItem(j *wire.W, id string, p *llm.Part, ns map[string][2]string, args string) {
	if id == "" {
		id = "fc_" + p.ID
	}
	namespace, name := callName(p, ns)
	if args == "" {
		args = "{}"
	}
	j.Obj().KStr("id", id).KStr("type", "function_call").KStr("status", "completed").KStr("call_id", p.ID).
		KStr("name", name).KStrOmit("namespace", namespace).KStr("arguments", args).End()
}
