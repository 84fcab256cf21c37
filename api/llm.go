package api

import "time"

// LLMExchange is one call through the daemon's LLM proxy, as the archive
// indexes it (GET /api/v1/llm/exchanges).
type LLMExchange struct {
	ID string `json:"id"`
	// SandboxID, RunID and KeyID say who called, when known.
	SandboxID string `json:"sandboxId,omitempty"`
	RunID     string `json:"runId,omitempty"`
	KeyID     string `json:"keyId,omitempty"`
	// ConversationID is the id of the conversation's first exchange.
	ConversationID string `json:"conversationId,omitempty"`
	// Format is the client's wire format: openai, openai-responses,
	// anthropic or gemini.
	Format string `json:"format"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// Model is what the client asked for; Provider and UpstreamModel
	// who answered (after fallbacks).
	Model         string `json:"model,omitempty"`
	Provider      string `json:"provider,omitempty"`
	UpstreamModel string `json:"upstreamModel,omitempty"`
	Stream        bool   `json:"stream"`
	// Passthrough: the client's format was the upstream's, the body went
	// through untouched.
	Passthrough bool `json:"passthrough"`
	// Status is the HTTP status the client got; 0 when none was sent.
	Status int `json:"status"`
	// State is in_progress, complete, client_gone (the client left
	// mid-answer) or interrupted (the daemon stopped mid-answer).
	State             string    `json:"state"`
	Error             string    `json:"error,omitempty"`
	Usage             LLMUsage  `json:"usage"`
	Attempts          int       `json:"attempts"`
	TimeToFirstByteMs float64   `json:"timeToFirstByteMs"`
	DurationMs        float64   `json:"durationMs"`
	CreatedAt         time.Time `json:"createdAt"`
	// RequestBytes and ResponseBytes are the client's bodies' sizes;
	// StoredBytes what the archive keeps of the whole exchange.
	RequestBytes  int64 `json:"requestBytes"`
	ResponseBytes int64 `json:"responseBytes"`
	StoredBytes   int64 `json:"storedBytes"`
}

// LLMUsage is the tokens of an exchange.
type LLMUsage struct {
	InputTokens     int `json:"inputTokens"`
	OutputTokens    int `json:"outputTokens"`
	CachedTokens    int `json:"cachedTokens"`
	ReasoningTokens int `json:"reasoningTokens"`
}

// LLMExchangeList is a page of exchanges, oldest first.
type LLMExchangeList struct {
	Items      []LLMExchange `json:"items"`
	NextCursor string        `json:"nextCursor,omitempty"`
	// FollowCursor, given as after (or Last-Event-ID) to
	// GET /api/v1/llm/exchanges/stream, follows from the moment before
	// this list was read: nothing that ends after the list is missed (an
	// exchange that ended while it was read may come in both).
	FollowCursor string `json:"followCursor,omitempty"`
}

// LLMEventExchange names the events of GET /api/v1/llm/exchanges/stream:
// each an LLMExchange that ended, its event id the cursor after it.
// An "error" event (an ErrorResponse) ends a stream that failed.
const LLMEventExchange = "exchange"

// LLMExchangeDetail is an exchange with its four parts
// (GET /api/v1/llm/exchanges/{id}, and each line of the export).
type LLMExchangeDetail struct {
	LLMExchange
	// Request is as the client sent it; UpstreamRequest and
	// UpstreamResponse the last call upstream (earlier attempts are only
	// counted); Response as the client got it. Credentials are
	// redacted. A part is absent when it never happened.
	Request          *LLMMessage `json:"request,omitempty"`
	UpstreamRequest  *LLMMessage `json:"upstreamRequest,omitempty"`
	UpstreamResponse *LLMMessage `json:"upstreamResponse,omitempty"`
	Response         *LLMMessage `json:"response,omitempty"`
}

// The parts of an exchange, for ?raw=.
const (
	LLMPartRequest          = "request"
	LLMPartUpstreamRequest  = "upstream_request"
	LLMPartUpstreamResponse = "upstream_response"
	LLMPartResponse         = "response"
)

// LLMMessage is a request or a response of an exchange.
type LLMMessage struct {
	Method  string              `json:"method,omitempty"`
	URL     string              `json:"url,omitempty"`
	Status  int                 `json:"status,omitempty"`
	Headers map[string][]string `json:"headers,omitempty"`
	// Body is the body as text, or base64 when BodyEncoding is "base64"
	// (a body that is not UTF-8). ?raw= gives the bytes themselves.
	Body         string `json:"body"`
	BodyEncoding string `json:"bodyEncoding,omitempty"`
	// Chunks are the pieces of a response body as they were read
	// (upstream) or written (to the client), with their times.
	Chunks []LLMChunk `json:"chunks,omitempty"`
}

// LLMChunk is a piece of a body: milliseconds since the exchange began,
// and its size in bytes.
type LLMChunk struct {
	AtMs float64 `json:"atMs"`
	Size int     `json:"size"`
}

// LLMConversation is the exchanges of one conversation: each request's
// messages extend the previous one's.
type LLMConversation struct {
	ID        string        `json:"id"`
	SandboxID string        `json:"sandboxId,omitempty"`
	RunID     string        `json:"runId,omitempty"`
	StartedAt time.Time     `json:"startedAt"`
	LastAt    time.Time     `json:"lastAt"`
	Usage     LLMUsage      `json:"usage"`
	Exchanges []LLMExchange `json:"exchanges"`
}

// LLMConversationList is a sandbox's conversations, oldest first.
type LLMConversationList struct {
	Items []LLMConversation `json:"items"`
}
