// Package replay answers model calls from a script of turns instead of a
// model: the proxy's replay provider, and the scripted model of the
// project's agent tests. A script is written by hand (YAML) or made from
// an archive the daemon exported (ParseArchive; Load takes either), so a
// recorded agent run re-runs with no model.
//
// The turn a request gets is chosen by the request alone: the number of
// assistant turns already in its history. A script therefore needs no
// state, serves any number of runs in parallel, and replays an agent's
// conversation the same way every time. Tool call ids are derived from the
// turn and position (call_<turn>_<i>), so they are the same on every run
// too. A Script is safe for concurrent use.
//
// The project's example tasks are scripted this way, one script per task
// and agent CLI in that CLI's own tools (tasks/replay/<task>/<agent>.yaml),
// and tasks/replay/llm.yaml serves each as the model
// replay-<task>-<agent>: runs that need no model at all.
package replay

import (
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/internal/llm"
)

// Script is a list of turns.
type Script struct {
	Turns []Turn `yaml:"turns" json:"turns"`
	// Repeat makes requests past the last turn get the last turn again
	// instead of an error.
	Repeat bool `yaml:"repeat" json:"repeat"`
}

// Turn is one answer of the model.
type Turn struct {
	// ID is the answer's id; by default replay_<turn>.
	ID        string     `yaml:"id" json:"id"`
	Thinking  string     `yaml:"thinking" json:"thinking"`
	Text      string     `yaml:"text" json:"text"`
	ToolCalls []ToolCall `yaml:"tool_calls" json:"tool_calls"`
	// Stop is a canonical stop reason; by default tool_use when the turn
	// calls tools, else end_turn.
	Stop  string `yaml:"stop" json:"stop"`
	Usage struct {
		InputTokens  int `yaml:"input_tokens" json:"input_tokens"`
		OutputTokens int `yaml:"output_tokens" json:"output_tokens"`
	} `yaml:"usage" json:"usage"`
}

// ToolCall is a call a turn makes; Arguments is any YAML or JSON value,
// sent as its JSON (a json.RawMessage as it is, byte for byte).
type ToolCall struct {
	// ID is the call's id; by default call_<turn>_<i>.
	ID        string `yaml:"id" json:"id"`
	Name      string `yaml:"name" json:"name"`
	Arguments any    `yaml:"arguments" json:"arguments"`
}

// Parse reads a script in YAML (JSON is YAML too).
func Parse(data []byte) (*Script, error) {
	var s Script
	if err := yaml.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parse replay script: %w", err)
	}
	if len(s.Turns) == 0 {
		return nil, fmt.Errorf("parse replay script: no turns")
	}
	for i, t := range s.Turns {
		for k, c := range t.ToolCalls {
			if c.Name == "" {
				return nil, fmt.Errorf("parse replay script: turn %d: tool call %d has no name", i+1, k+1)
			}
			if _, err := json.Marshal(jsonable(c.Arguments)); err != nil {
				return nil, fmt.Errorf("parse replay script: turn %d: tool call %s: arguments: %w", i+1, c.Name, err)
			}
		}
	}
	return &s, nil
}

// Answer is the response to req: the turn after the assistant turns
// already in its history.
func (s *Script) Answer(req *llm.Request) (*llm.Response, error) {
	n := 0
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			n++
		}
	}
	if n >= len(s.Turns) {
		if !s.Repeat {
			return nil, llm.Invalid("replay script has %d turns; this request asks for turn %d", len(s.Turns), n+1)
		}
		n = len(s.Turns) - 1
	}
	t := s.Turns[n]
	resp := &llm.Response{ID: t.ID, Model: req.Model}
	if resp.ID == "" {
		resp.ID = fmt.Sprintf("replay_%d", n+1)
	}
	if t.Thinking != "" {
		resp.Content = append(resp.Content, llm.Part{Type: llm.PartThinking, Text: t.Thinking})
	}
	if t.Text != "" {
		resp.Content = append(resp.Content, llm.Text(t.Text))
	}
	for i, c := range t.ToolCalls {
		args, _ := json.Marshal(jsonable(c.Arguments))
		switch a := c.Arguments.(type) {
		case nil:
			args = []byte("{}")
		case json.RawMessage:
			args = a
		}
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", n+1, i+1)
		}
		ns, name := "", c.Name
		// A namespaced tool of the client's (Responses) keeps its namespace.
		for _, tool := range req.Tools {
			if tool.Namespace != "" && llm.QualifiedName(tool.Namespace, tool.Name) == c.Name {
				ns, name = tool.Namespace, tool.Name
			}
		}
		resp.Content = append(resp.Content, llm.Part{
			Type: llm.PartToolCall, ID: id, Namespace: ns, Name: name, Arguments: string(args),
		})
	}
	resp.StopReason = llm.StopReason(t.Stop)
	if resp.StopReason == "" {
		resp.StopReason = llm.StopEndTurn
		if len(t.ToolCalls) > 0 {
			resp.StopReason = llm.StopToolUse
		}
	}
	resp.Usage = llm.Usage{InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens}
	if resp.Usage.InputTokens == 0 {
		resp.Usage.InputTokens = llm.EstimateTokens(req)
	}
	if resp.Usage.OutputTokens == 0 {
		resp.Usage.OutputTokens = (len(t.Text) + len(t.Thinking) + 3) / 4
		for _, p := range resp.Content {
			resp.Usage.OutputTokens += len(p.Arguments) / 4
		}
	}
	return resp, nil
}

// jsonable turns the map[string]any / map[any]any trees YAML makes into
// values encoding/json can write.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, sub := range x {
			out[k] = jsonable(sub)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, sub := range x {
			out[strings.TrimSpace(fmt.Sprint(k))] = jsonable(sub)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, sub := range x {
			out[i] = jsonable(sub)
		}
		return out
	}
	return v
}
