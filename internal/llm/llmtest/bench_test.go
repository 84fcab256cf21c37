package llmtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/anthropic"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
	"github.com/agent2env/agent2env/internal/llm/llmtest"
)

// typicalRequest is an agent's request in the middle of a session: an
// 8 KB system prompt, 15 tools with schemas, 30 turns of text, tool calls
// and results (about 30 KB of JSON).
func typicalRequest() *llm.Request {
	req := &llm.Request{Model: "coder", MaxTokens: 32000, Stream: true, StreamUsage: true,
		System: []llm.Part{llm.Text(strings.Repeat("You are a careful coding agent. Follow the rules. ", 160))}}
	for i := range 15 {
		req.Tools = append(req.Tools, llm.Tool{
			Name: fmt.Sprintf("tool_%d", i), Description: strings.Repeat("Does a useful thing. ", 8),
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"A path."},"lines":{"type":"array","items":{"type":"integer"}},"force":{"type":"boolean"}},"required":["path"]}`),
		})
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("Fix the failing test in pkg/foo.")}})
	for i := range 10 {
		id := fmt.Sprintf("call_%d", i)
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.Text("Let me look at the file."),
				{Type: llm.PartToolCall, ID: id, Name: "tool_3", Arguments: `{"path":"pkg/foo/foo.go","lines":[1,200]}`},
			}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
				{Type: llm.PartToolResult, ID: id, Content: []llm.Part{llm.Text(strings.Repeat("func Foo() int { return 42 }\n", 20))}},
			}},
		)
	}
	return req
}

// BenchmarkTranslateRequest reads a typical request as it arrives from a
// client of one format and writes it for an upstream of another.
func BenchmarkTranslateRequest(b *testing.B) {
	for _, from := range codecs {
		body, _ := from.EncodeRequest(typicalRequest())
		for _, to := range codecs {
			if to.Format() == from.Format() {
				continue
			}
			b.Run(fmt.Sprintf("%s_to_%s", from.Format(), to.Format()), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					req, err := from.DecodeRequest(body)
					if err != nil {
						b.Fatal(err)
					}
					req.Model = "upstream"
					if _, err := to.EncodeRequest(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPassthroughRequest is what a same-format request costs: the
// model renamed in place.
func BenchmarkPassthroughRequest(b *testing.B) {
	body, _ := anthropic.Codec{}.EncodeRequest(typicalRequest())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := wire.ReplaceModel(body, "claude-sonnet-4-5"); !ok {
			b.Fatal("no model")
		}
	}
}

// stream500 is an upstream's stream of 500 events: text, then a tool call
// whose arguments come in pieces.
func stream500(c llm.Codec) []byte {
	var text strings.Builder
	for range 400 {
		text.WriteString("word ")
	}
	args := `{"path":"pkg/foo/foo.go","content":"` + strings.Repeat("x", 440) + `"}`
	resp := &llm.Response{ID: "msg_1", Model: "m", StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 9000, OutputTokens: 500},
		Content: []llm.Part{llm.Text(text.String()), {Type: llm.PartToolCall, ID: "call_1", Name: "write", Arguments: args}}}
	evs := llm.ResponseEvents(resp, 5) // 400 text pieces, 96 argument pieces
	var buf bytes.Buffer
	enc := c.NewStreamEncoder(llm.NewSSEWriter(&buf), &llm.Request{StreamUsage: true})
	for i := range evs {
		_ = enc.Encode(&evs[i])
	}
	return buf.Bytes()
}

// BenchmarkTranslateStream translates a 500-event stream from an upstream
// of one format to a client of another, as the bytes arrive.
func BenchmarkTranslateStream(b *testing.B) {
	for _, from := range codecs {
		stream := stream500(from)
		for _, to := range codecs {
			if to.Format() == from.Format() {
				continue
			}
			b.Run(fmt.Sprintf("%s_to_%s", from.Format(), to.Format()), func(b *testing.B) {
				b.SetBytes(int64(len(stream)))
				b.ReportAllocs()
				var events int
				for b.Loop() {
					dec := from.NewStreamDecoder(llm.NewSSEReader(bytes.NewReader(stream)))
					enc := to.NewStreamEncoder(llm.NewSSEWriter(io.Discard), &llm.Request{StreamUsage: true})
					events = 0
					for {
						ev, err := dec.Next()
						if err == io.EOF {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
						events++
						if err := enc.Encode(&ev); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
			})
		}
	}
}

// TestStream500 keeps the benchmark honest about its size.
func TestStream500(t *testing.T) {
	evs, err := llmtest.DecodeStream(anthropic.Codec{}, bytes.NewReader(stream500(anthropic.Codec{})))
	if err != nil || len(evs) < 490 || len(evs) > 510 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
}
