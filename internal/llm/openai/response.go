package openai

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
)

type response struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage       `json:"usage"`
	Error *errorObject `json:"error"`
}

// DecodeResponse implements llm.Codec.
func (Codec) DecodeResponse(body []byte) (*llm.Response, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, llm.Errorf(llm.ErrorUpstream, "decode chat completion: %v", err)
	}
	if r.Error != nil {
		return nil, DecodeErrorBody(502, body)
	}
	if len(r.Choices) == 0 {
		return nil, llm.Errorf(llm.ErrorUpstream, "decode chat completion: no choices")
	}
	c := &r.Choices[0]
	resp := &llm.Response{ID: r.ID, Model: r.Model, Content: assistantParts(&c.Message), StopReason: stopReason(c.FinishReason)}
	if resp.StopReason == llm.StopEndTurn && resp.HasToolCalls() {
		resp.StopReason = llm.StopToolUse // some compatible servers say "stop"
	}
	if r.Usage != nil {
		resp.Usage = r.Usage.canonical()
	}
	return resp, nil
}

// DecodeUsage implements llm.UsageDecoder.
func (Codec) DecodeUsage(member []byte) (llm.Usage, error) {
	var u usage
	if err := json.Unmarshal(member, &u); err != nil {
		return llm.Usage{}, llm.Errorf(llm.ErrorUpstream, "decode chat completion usage: %v", err)
	}
	return u.canonical(), nil
}

// EncodeResponse implements llm.Codec.
func (Codec) EncodeResponse(req *llm.Request, resp *llm.Response) ([]byte, error) {
	var j wire.W
	j.B = make([]byte, 0, 512)
	j.Obj().KStr("id", completionID(resp.ID)).KStr("object", "chat.completion").KInt("created", int(time.Now().Unix())).
		KStr("model", resp.Model).KArr("choices").Obj().KInt("index", 0).KObj("message")
	var text, reasoning strings.Builder
	calls := 0
	for i := range resp.Content {
		switch p := &resp.Content[i]; p.Type {
		case llm.PartText:
			text.WriteString(p.Text)
		case llm.PartThinking:
			reasoning.WriteString(p.Text)
		case llm.PartToolCall:
			calls++
		}
	}
	j.KStr("role", "assistant")
	if text.Len() > 0 || calls == 0 {
		j.KStr("content", text.String())
	} else {
		j.Key("content").Null()
	}
	if reasoning.Len() > 0 {
		j.KStr("reasoning_content", reasoning.String())
	}
	j.Key("refusal").Null()
	if calls > 0 {
		j.KArr("tool_calls")
		for i := range resp.Content {
			if p := &resp.Content[i]; p.Type == llm.PartToolCall {
				writeToolCall(&j, -1, p.ID, llm.QualifiedName(p.Namespace, p.Name), arguments(p.Arguments))
			}
		}
		j.End()
	}
	j.End().Key("logprobs").Null().KStr("finish_reason", finishReason(resp.StopReason)).End().End()
	writeUsage(&j, resp.Usage)
	return j.End().B, nil
}

// arguments are never empty towards a client: clients parse them as JSON.
func arguments(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

func completionID(id string) string {
	if id == "" {
		return llm.NewID("chatcmpl-")
	}
	return id
}
