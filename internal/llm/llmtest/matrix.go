package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/llm"
)

// Matrix runs every case through every pair of formats as the proxy does:
// a client of format A encodes the request; the proxy decodes it and
// encodes it for an upstream of format B; the upstream decodes it (and must
// see the same conversation) and answers in B, whole or streamed; the proxy
// decodes that and encodes it for the client in A; the client decodes it
// and must see the case's answer: text, thinking, tool calls with complete
// JSON arguments, stop reason and usage.
func Matrix(t *testing.T, codecs []llm.Codec) {
	for _, a := range codecs {
		for _, b := range codecs {
			for _, tc := range Cases() {
				for _, stream := range []bool{false, true} {
					name := fmt.Sprintf("%s_to_%s/%s/stream=%v", a.Format(), b.Format(), tc.Name, stream)
					t.Run(name, func(t *testing.T) { translate(t, a, b, tc, stream) })
				}
			}
		}
	}
}

func translate(t *testing.T, a, b llm.Codec, tc Case, stream bool) {
	client := CloneRequest(tc.Request)
	client.Stream, client.StreamUsage = stream, true
	PrepareRequest(a.Format(), client)
	body, err := a.EncodeRequest(client)
	if err != nil {
		t.Fatalf("client encode: %v", err)
	}
	// The proxy.
	inbound, err := a.DecodeRequest(body)
	if err != nil {
		t.Fatalf("proxy decode %s: %v", body, err)
	}
	if a.Format() == llm.FormatGemini {
		inbound.Model, inbound.Stream = client.Model, stream
	}
	inbound.Model = "upstream-model"
	upBody, err := b.EncodeRequest(inbound)
	if err != nil {
		t.Fatalf("proxy encode for upstream: %v", err)
	}
	// The upstream.
	up, err := b.DecodeRequest(upBody)
	if err != nil {
		t.Fatalf("upstream decode %s: %v", upBody, err)
	}
	if b.Format() == llm.FormatGemini {
		up.Model, up.Stream = inbound.Model, stream
	}
	if d := cmp.Diff(RequestView(client), RequestView(up)); d != "" {
		t.Errorf("the upstream sees another conversation (-client +upstream):\n%s\nupstream body: %s", d, upBody)
	}
	if up.Model != "upstream-model" || up.Stream != stream {
		t.Errorf("upstream got model %q stream %v", up.Model, up.Stream)
	}
	answer := CloneResponse(tc.Response)
	Prepare(b.Format(), answer.Content)
	var got *llm.Response
	if !stream {
		upResp, err := b.EncodeResponse(up, answer)
		if err != nil {
			t.Fatal(err)
		}
		r, err := b.DecodeResponse(upResp)
		if err != nil {
			t.Fatalf("proxy decode upstream response %s: %v", upResp, err)
		}
		out, err := a.EncodeResponse(inbound, r)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = a.DecodeResponse(out); err != nil {
			t.Fatalf("client decode %s: %v", out, err)
		}
	} else {
		upStream := EncodeStream(t, b, up, llm.ResponseEvents(answer, 3))
		var out bytes.Buffer
		enc := a.NewStreamEncoder(llm.NewSSEWriter(&out), inbound)
		if _, err := llm.Pump(b.NewStreamDecoder(llm.NewSSEReader(bytes.NewReader(upStream))), enc, nil); err != nil {
			t.Fatalf("proxy pump: %v\nupstream stream:\n%s", err, upStream)
		}
		evs, err := DecodeStream(a, bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("client decode stream: %v\n%s", err, out.Bytes())
		}
		if err := CheckStream(evs); err != nil {
			t.Fatalf("client stream: %v\n%s", err, out.Bytes())
		}
		var acc llm.Accumulator
		for i := range evs {
			acc.Add(&evs[i])
		}
		got = acc.Response()
	}
	want := ResponseView(tc.Response)
	if a.Format() == llm.FormatAnthropic || b.Format() == llm.FormatAnthropic {
		want.Reasoning = 0 // Anthropic does not count reasoning tokens apart
	}
	if d := cmp.Diff(want, ResponseView(got)); d != "" {
		t.Errorf("the client sees another answer (-want +got):\n%s", d)
	}
}

// Conversation is what must survive any translation of a request.
type Conversation struct {
	System    string
	Turns     []string
	Tools     []string
	MaxTokens int
	Reasoning bool
	Choice    string
}

// RequestView is the translation-proof content of a request: the system
// text, each part of each turn (thinking aside: it only goes back to the
// format that signed it), tool names and schemas, the output limit, whether
// reasoning was asked for, and the tool choice.
func RequestView(r *llm.Request) Conversation {
	var c Conversation
	var sys []string
	for _, p := range r.System {
		sys = append(sys, p.Text)
	}
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if m.Role == llm.RoleSystem {
				sys = append(sys, p.Text)
				continue
			}
			switch p.Type {
			case llm.PartText:
				c.Turns = append(c.Turns, string(m.Role)+": "+p.Text)
			case llm.PartImage:
				c.Turns = append(c.Turns, string(m.Role)+": image "+p.Data+p.URL)
			case llm.PartToolCall:
				c.Turns = append(c.Turns, fmt.Sprintf("%s: call %s %s %s", m.Role, p.ID, llm.QualifiedName(p.Namespace, p.Name), canonicalJSON(p.Arguments)))
			case llm.PartToolResult:
				var text strings.Builder
				for _, x := range p.Content {
					text.WriteString(x.Text)
				}
				c.Turns = append(c.Turns, fmt.Sprintf("%s: result %s %q", m.Role, p.ID, text.String()))
			}
		}
	}
	c.System = strings.Join(sys, "\n\n")
	for _, tool := range r.Tools {
		c.Tools = append(c.Tools, llm.QualifiedName(tool.Namespace, tool.Name)+" "+canonicalJSON(string(tool.Parameters)))
	}
	c.MaxTokens = r.MaxTokens
	c.Reasoning = r.Reasoning != nil && !r.Reasoning.Disabled
	if r.ToolChoice != nil {
		c.Choice = string(r.ToolChoice.Mode) + " " + r.ToolChoice.Name
	}
	return c
}

// Answer is what a client must see of a response, whatever the formats.
type Answer struct {
	Text, Thinking                string
	Calls                         []string
	Stop                          llm.StopReason
	In, Out, Cached, Reasoning    int
	CallIDsSet, ArgumentsComplete bool
}

// ResponseView is the translation-proof content of a response.
func ResponseView(r *llm.Response) Answer {
	a := Answer{CallIDsSet: true, ArgumentsComplete: true}
	for _, p := range r.Content {
		switch p.Type {
		case llm.PartText:
			a.Text += p.Text
		case llm.PartThinking:
			a.Thinking += p.Text
		case llm.PartToolCall:
			a.Calls = append(a.Calls, llm.QualifiedName(p.Namespace, p.Name)+" "+canonicalJSON(p.Arguments))
			a.CallIDsSet = a.CallIDsSet && p.ID != ""
			a.ArgumentsComplete = a.ArgumentsComplete && json.Valid([]byte(p.Arguments))
		}
	}
	switch r.StopReason {
	case llm.StopSequence, llm.StopPauseTurn:
		a.Stop = llm.StopEndTurn
	case llm.StopRefusal:
		a.Stop = llm.StopContentFilter
	default:
		a.Stop = r.StopReason
	}
	a.In, a.Out, a.Cached, a.Reasoning = r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CachedTokens, r.Usage.ReasoningTokens
	return a
}

// canonicalJSON re-encodes JSON text so that formatting does not matter.
func canonicalJSON(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return "invalid:" + s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
