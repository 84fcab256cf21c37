// Package llm is the canonical model of a conversation with a language model
// and of its stream events, through which agent2env's LLM proxy translates
// between wire formats.
//
// Each wire format (OpenAI Chat Completions, OpenAI Responses, Anthropic
// Messages, Gemini generateContent) has one codec in its own subpackage that
// decodes into this model and encodes out of it, on both sides of the proxy:
// a client's request and the answer it gets, and the request sent upstream
// and the answer that comes back. Translating from format A to format B is
// therefore decode(A) then encode(B), never a pairwise translator.
//
// What a format cannot express is carried or dropped knowingly: parts and
// tools the model has no place for travel as opaque values tagged with their
// format (Part.Raw, Tool.Raw, Request.Extra), written back by a codec of the
// same format and skipped by the others; provider signatures (Anthropic
// thinking signatures, Responses encrypted reasoning, Gemini thought
// signatures) are only sent back to the format that issued them (Part.Origin).
//
// The types are plain values with no locks: a Request or Response belongs to
// one goroutine at a time.
package llm

import (
	"encoding/json"
	"fmt"
)

// Format names a wire format. The values are the provider types of the
// proxy's configuration.
type Format string

// The wire formats.
const (
	FormatOpenAI    Format = "openai"           // Chat Completions
	FormatResponses Format = "openai-responses" // OpenAI Responses
	FormatAnthropic Format = "anthropic"        // Anthropic Messages
	FormatGemini    Format = "gemini"           // Gemini generateContent
)

// Role is who a message is from. Tool results are parts of a user message,
// as in Anthropic's and Gemini's formats; the OpenAI codecs split them into
// their own messages or items.
type Role string

// The roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleSystem is a system (or developer) message that is not at the start
	// of a conversation; leading ones are Request.System. Formats without
	// such messages move their text into the system prompt.
	RoleSystem Role = "system"
)

// Request is one call to a model.
type Request struct {
	Model string
	// System is the system prompt: text parts (with their cache control).
	System   []Part
	Messages []Message
	Tools    []Tool
	// ToolChoice is nil when the client left it to the model.
	ToolChoice        *ToolChoice
	ParallelToolCalls *bool
	// MaxTokens is the output limit; 0 means unset.
	MaxTokens   int
	Temperature *float64
	TopP        *float64
	TopK        *int
	Stop        []string
	// Reasoning is nil when the client did not ask for anything.
	Reasoning *Reasoning
	Stream    bool
	// StreamUsage: the client wants usage in the stream. Always true for
	// formats that always send it; OpenAI Chat clients ask with
	// stream_options.include_usage.
	StreamUsage bool
	// User is the end-user identifier some formats carry (OpenAI user,
	// Anthropic metadata.user_id).
	User string
	// Extra holds the source format's top-level fields this model has no
	// place for; only a codec of that format writes them back.
	Extra Extra
}

// Extra is a set of raw JSON fields of one format, in their original order.
type Extra struct {
	Format Format
	Fields []Field
}

// Field is one raw JSON object member.
type Field struct {
	Name  string
	Value json.RawMessage
}

// For returns the fields if they came from format f, else nil.
func (e Extra) For(f Format) []Field {
	if e.Format != f {
		return nil
	}
	return e.Fields
}

// Message is one turn of a conversation.
type Message struct {
	Role  Role
	Parts []Part
}

// PartType is the kind of a Part.
type PartType uint8

// The part types.
const (
	PartText PartType = iota + 1
	PartImage
	PartToolCall
	PartToolResult
	// PartThinking is reasoning: the model's thinking text or summary, with
	// the provider's signature or encrypted content.
	PartThinking
	// PartOpaque is content only its own format understands (Part.Raw).
	PartOpaque
)

var partTypeNames = [...]string{"", "text", "image", "tool_call", "tool_result", "thinking", "opaque"}

func (t PartType) String() string {
	if int(t) < len(partTypeNames) {
		return partTypeNames[t]
	}
	return fmt.Sprintf("part(%d)", t)
}

// Part is one piece of a message's content. Which fields are used depends
// on Type; the others are zero.
type Part struct {
	Type PartType
	// Text: the text of a text part, the thinking of a thinking part.
	Text string

	// Image: either MediaType and Data (base64, as on the wire: it is never
	// decoded) or URL.
	MediaType string
	Data      string
	URL       string

	// ID: a tool call's id, the call a tool result answers, or a reasoning
	// item's id (Responses).
	ID string
	// Name and Namespace of the tool called (Namespace: Responses namespace
	// tools). A tool result's Name is known when the format carries it
	// (Gemini needs it).
	Name      string
	Namespace string
	// Arguments is a tool call's arguments as JSON text.
	Arguments string

	// Content of a tool result: text and image parts.
	Content []Part
	IsError bool

	// Signature: an Anthropic thinking signature, a Responses reasoning
	// item's encrypted content, or a Gemini thought signature (on any part).
	// Redacted marks Anthropic redacted thinking, whose data is in
	// Signature.
	Signature string
	Redacted  bool
	// Origin is the format whose codec decoded a part carrying a signature or
	// raw content; encoders of another format drop what only Origin can read.
	Origin Format

	// CacheControl is Anthropic's cache_control of this block, raw.
	CacheControl json.RawMessage
	// Raw is an opaque part as its Origin format wrote it.
	Raw json.RawMessage
}

// Text returns a text part.
func Text(s string) Part { return Part{Type: PartText, Text: s} }

// Tool is a tool the model may call.
type Tool struct {
	Name        string
	Namespace   string // Responses namespace tools: the namespace it is in
	Description string
	// Parameters is its JSON Schema, raw.
	Parameters   json.RawMessage
	CacheControl json.RawMessage
	// Raw, when set, is a built-in or otherwise format-specific tool (Responses
	// web_search, Anthropic server tools, Gemini googleSearch…) exactly as
	// Origin wrote it; encoders of other formats leave it out.
	Raw    json.RawMessage
	Origin Format
}

// QualifiedName is the name a tool in a namespace has in formats without
// namespaces: namespace + "__" + name, the way MCP tools are usually
// flattened.
func QualifiedName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "__" + name
}

// ToolChoiceMode says whether and which tool the model must call.
type ToolChoiceMode string

// The tool choice modes.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"
	ToolChoiceNone     ToolChoiceMode = "none"
	ToolChoiceRequired ToolChoiceMode = "required" // any tool
	ToolChoiceTool     ToolChoiceMode = "tool"     // the tool Name
)

// ToolChoice constrains tool use.
type ToolChoice struct {
	Mode ToolChoiceMode
	Name string
}

// Reasoning is what the client asked of the model's thinking. Formats speak
// of effort (OpenAI) or of a token budget (Anthropic, Gemini); an encoder
// uses whichever is set and derives the other with EffortBudget and
// BudgetEffort.
type Reasoning struct {
	Disabled     bool
	Effort       string // minimal, low, medium, high
	BudgetTokens int
	// Summary is the Responses reasoning summary setting (auto, concise,
	// detailed).
	Summary string
}

// EffortBudget is the thinking budget an effort level stands for.
func EffortBudget(effort string) int {
	switch effort {
	case "minimal":
		return 1024
	case "low":
		return 2048
	case "high", "xhigh":
		return 24576
	default:
		return 8192
	}
}

// BudgetEffort is the effort level nearest a thinking budget.
func BudgetEffort(budget int) string {
	switch {
	case budget <= 1024:
		return "minimal"
	case budget <= 4096:
		return "low"
	case budget <= 16384:
		return "medium"
	default:
		return "high"
	}
}

// StopReason is why the model stopped.
type StopReason string

// The stop reasons.
const (
	StopEndTurn       StopReason = "end_turn"
	StopMaxTokens     StopReason = "max_tokens"
	StopSequence      StopReason = "stop_sequence"
	StopToolUse       StopReason = "tool_use"
	StopContentFilter StopReason = "content_filter"
	StopRefusal       StopReason = "refusal"
	StopPauseTurn     StopReason = "pause_turn"
)

// Usage counts tokens. InputTokens includes the cached ones (read and
// written) and OutputTokens the reasoning ones, as OpenAI counts; codecs of
// formats that count otherwise convert.
type Usage struct {
	InputTokens      int
	OutputTokens     int
	CachedTokens     int // input read from the cache
	CacheWriteTokens int // input written to the cache (Anthropic)
	ReasoningTokens  int
}

// Add adds u2 to u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.CachedTokens += u2.CachedTokens
	u.CacheWriteTokens += u2.CacheWriteTokens
	u.ReasoningTokens += u2.ReasoningTokens
}

// Response is a model's complete answer.
type Response struct {
	ID           string
	Model        string
	Content      []Part
	StopReason   StopReason
	StopSequence string
	Usage        Usage
}

// HasToolCalls reports whether the response calls a tool.
func (r *Response) HasToolCalls() bool {
	for i := range r.Content {
		if r.Content[i].Type == PartToolCall {
			return true
		}
	}
	return false
}
