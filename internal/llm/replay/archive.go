package replay

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/anthropic"
	"github.com/agent2env/agent2env/internal/llm/gemini"
	"github.com/agent2env/agent2env/internal/llm/openai"
	"github.com/agent2env/agent2env/internal/llm/responses"
)

// Load reads a replay file: an archive the daemon exported (JSON Lines of
// exchanges, `agent2env llm export`), or else a script.
func Load(data []byte) (*Script, error) {
	if isArchive(data) {
		return ParseArchive(bytes.NewReader(data))
	}
	return Parse(data)
}

// isArchive says whether data's first line is an exported exchange.
func isArchive(data []byte) bool {
	line, _, _ := bytes.Cut(bytes.TrimLeft(data, " \t\r\n"), []byte("\n"))
	var probe struct {
		Format  string          `json:"format"`
		Request json.RawMessage `json:"request"`
	}
	return len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &probe) == nil && probe.Format != "" && probe.Request != nil
}

var codecs = map[string]llm.Codec{
	string(llm.FormatOpenAI):    openai.Codec{},
	string(llm.FormatResponses): responses.Codec{},
	string(llm.FormatAnthropic): anthropic.Codec{},
	string(llm.FormatGemini):    gemini.Codec{},
}

// ParseArchive makes a script of an exported archive: each generation the
// client got a successful answer to becomes the turn of its place in the
// conversation (the assistant turns in its request), with the answer's
// thinking, text, tool calls (their ids and argument text as they were),
// stop reason and usage, whatever format it was recorded in. An archive of
// several conversations replays the one with the most exchanges; a turn
// asked more than once (a retry) replays its last answer.
func ParseArchive(r io.Reader) (*Script, error) {
	type turnAt struct {
		n    int
		turn Turn
	}
	convs := map[string][]turnAt{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 256<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var x api.LLMExchangeDetail
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("parse replay archive: line %d: %w", line, err)
		}
		n, turn, ok, err := archivedTurn(&x)
		if err != nil {
			return nil, fmt.Errorf("parse replay archive: line %d (exchange %s): %w", line, x.ID, err)
		}
		if !ok {
			continue
		}
		conv := x.ConversationID
		if conv == "" {
			conv = x.ID
		}
		if convs[conv] == nil {
			order = append(order, conv)
		}
		convs[conv] = append(convs[conv], turnAt{n, turn})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse replay archive: %w", err)
	}
	var best string
	for _, c := range order {
		if len(convs[c]) > len(convs[best]) {
			best = c
		}
	}
	if best == "" {
		return nil, errors.New("parse replay archive: no successful generation in it")
	}
	var turns []Turn
	for _, t := range convs[best] {
		for len(turns) <= t.n {
			turns = append(turns, Turn{})
		}
		turns[t.n] = t.turn
	}
	for i, t := range turns {
		if t.Text == "" && t.Thinking == "" && len(t.ToolCalls) == 0 && t.Stop == "" {
			return nil, fmt.Errorf("parse replay archive: conversation %s has no answer for turn %d", best, i+1)
		}
	}
	return &Script{Turns: turns}, nil
}

// archivedTurn is the turn an exchange answered, and its place; ok is
// false for exchanges that are no successful generation.
func archivedTurn(x *api.LLMExchangeDetail) (n int, t Turn, ok bool, err error) {
	c := codecs[x.Format]
	if c == nil || x.Request == nil || x.Response == nil || x.Status < 200 || x.Status > 299 || x.State != "complete" ||
		strings.Contains(x.Path, "count_tokens") || strings.Contains(x.Path, ":countTokens") {
		return 0, t, false, nil
	}
	reqBody, err := body(x.Request)
	if err != nil {
		return 0, t, false, err
	}
	req, err := c.DecodeRequest(reqBody)
	if err != nil {
		return 0, t, false, fmt.Errorf("decode its request: %w", err)
	}
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			n++
		}
	}
	respBody, err := body(x.Response)
	if err != nil {
		return 0, t, false, err
	}
	var resp *llm.Response
	if x.Stream {
		var acc llm.Accumulator
		dec := c.NewStreamDecoder(llm.NewSSEReader(bytes.NewReader(respBody)))
		for {
			ev, err := dec.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return 0, t, false, fmt.Errorf("decode its answer: %w", err)
			}
			acc.Add(&ev)
		}
		resp = acc.Response()
	} else if resp, err = c.DecodeResponse(respBody); err != nil {
		return 0, t, false, fmt.Errorf("decode its answer: %w", err)
	}
	t.ID, t.Stop = resp.ID, string(resp.StopReason)
	t.Usage.InputTokens, t.Usage.OutputTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
	for _, p := range resp.Content {
		switch p.Type {
		case llm.PartThinking:
			t.Thinking += p.Text
		case llm.PartText:
			t.Text += p.Text
		case llm.PartToolCall:
			name := p.Name
			if p.Namespace != "" {
				name = llm.QualifiedName(p.Namespace, p.Name)
			}
			args := json.RawMessage(p.Arguments)
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			t.ToolCalls = append(t.ToolCalls, ToolCall{ID: p.ID, Name: name, Arguments: args})
		}
	}
	return n, t, true, nil
}

func body(m *api.LLMMessage) ([]byte, error) {
	if m.BodyEncoding == "base64" {
		return base64.StdEncoding.DecodeString(m.Body)
	}
	return []byte(m.Body), nil
}
