package gemini

import (
	"encoding/json"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

type response struct {
	Candidates []struct {
		Content      content `json:"content"`
		FinishReason string  `json:"finishReason"`
		Index        int     `json:"index"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *usageMetadata `json:"usageMetadata"`
	ModelVersion  string         `json:"modelVersion"`
	ResponseID    string         `json:"responseId"`
	Error         *apiError      `json:"error"`
}

// DecodeResponse implements llm.Codec.
func (Codec) DecodeResponse(body []byte) (*llm.Response, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, llm.Errorf(llm.ErrorUpstream, "decode gemini response: %v", err)
	}
	if r.Error != nil {
		return nil, Codec{}.DecodeError(r.Error.Code, body)
	}
	resp := &llm.Response{ID: r.ResponseID, Model: r.ModelVersion, Usage: r.UsageMetadata.canonical()}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			resp.StopReason = llm.StopContentFilter
			return resp, nil
		}
		return nil, llm.Errorf(llm.ErrorUpstream, "decode gemini response: no candidates")
	}
	c := &r.Candidates[0]
	parts, err := decodeParts(c.Content.Parts, func(j int) json.RawMessage {
		return wire.At(body, "candidates", 0, "content", "parts", j)
	})
	if err != nil {
		return nil, llm.Errorf(llm.ErrorUpstream, "decode gemini response: %v", err)
	}
	resp.Content = parts
	fillCallIDs(resp.Content)
	resp.StopReason = stopReason(c.FinishReason, resp.HasToolCalls())
	if resp.StopReason == "" {
		resp.StopReason = llm.StopEndTurn
	}
	return resp, nil
}

// fillCallIDs gives the calls of a response without ids fresh ones: the
// client will send them back with its results.
func fillCallIDs(parts []llm.Part) {
	for i := range parts {
		if parts[i].Type == llm.PartToolCall && parts[i].ID == "" {
			parts[i].ID = llm.NewID("call_")
		}
	}
}

// EncodeResponse implements llm.Codec.
func (Codec) EncodeResponse(req *llm.Request, resp *llm.Response) ([]byte, error) {
	var j wire.W
	j.B = make([]byte, 0, 512)
	j.Obj().KArr("candidates").Obj().KObj("content").KStr("role", "model").KArr("parts")
	for i := range resp.Content {
		writeOutputPart(&j, &resp.Content[i], resp.Content[i].Text, resp.Content[i].Arguments)
	}
	j.End().End().KStr("finishReason", finishReason(resp.StopReason)).KInt("index", 0).End().End()
	writeUsage(&j, resp.Usage)
	j.KStr("modelVersion", resp.Model).KStrOmit("responseId", resp.ID)
	return j.End().B, nil
}

// writeOutputPart writes a part of a response to a client: thinking from
// any format is a thought, but only Gemini's signatures are kept.
func writeOutputPart(j *wire.W, p *llm.Part, text, args string) {
	switch p.Type {
	case llm.PartText:
		j.Obj().KStr("text", text)
	case llm.PartThinking:
		j.Obj().KStr("text", text).KBool("thought", true)
	case llm.PartToolCall:
		j.Obj().KObj("functionCall").KStrOmit("id", p.ID).KStr("name", llm.QualifiedName(p.Namespace, p.Name)).
			KRaw("args", wire.ArgumentsObject(args)).End()
	case llm.PartImage:
		j.Obj().KObj("inlineData").KStr("mimeType", p.MediaType).KStr("data", p.Data).End()
	case llm.PartOpaque:
		if p.Origin == llm.FormatGemini {
			j.Raw(p.Raw)
		}
		return
	default:
		return
	}
	if p.Origin == llm.FormatGemini && p.Signature != "" {
		j.KStr("thoughtSignature", p.Signature)
	}
	j.End()
}
