package llm

import "net/http"

// Codec reads and writes one wire format, for both sides of the proxy. A
// Codec is stateless and safe for concurrent use; the stream encoders and
// decoders it makes belong to one stream.
//
// Errors from the decoders of client input are *Error of kind
// ErrorInvalidRequest (a 4xx in the client's format); errors from the
// decoders of upstream output are *Error of kind ErrorUpstream.
type Codec interface {
	Format() Format

	// DecodeRequest reads a client's request body. (Gemini carries the
	// model and streaming in the URL: the caller fills Model and Stream.)
	DecodeRequest(body []byte) (*Request, error)
	// EncodeResponse writes a complete response for the client that sent
	// req.
	EncodeResponse(req *Request, resp *Response) ([]byte, error)
	// NewStreamEncoder writes a stream for the client that sent req.
	NewStreamEncoder(sink SSESink, req *Request) StreamEncoder
	// EncodeError writes err as the format's error body, with the status to
	// answer with.
	EncodeError(err *Error) (status int, body []byte)

	// Upstream is how to call a server of this format.
	Upstream(model string, stream bool) Endpoint
	// EncodeRequest writes req for an upstream.
	EncodeRequest(req *Request) ([]byte, error)
	// DecodeResponse reads an upstream's complete response.
	DecodeResponse(body []byte) (*Response, error)
	// NewStreamDecoder reads an upstream's stream.
	NewStreamDecoder(src SSESource) StreamDecoder
	// DecodeError reads an upstream's error answer.
	DecodeError(status int, body []byte) *Error
}

// Endpoint is the path (with query) to call on an upstream, relative to its
// base URL, and how to present the key.
type Endpoint struct {
	Path string
	// SetKey puts the key where the format expects it.
	SetKey func(h http.Header, key string)
}

// UsageDecoder is implemented by codecs that read a complete response's
// usage from its usage member alone (the value of "usage"), as
// DecodeResponse reports it, without decoding the rest.
type UsageDecoder interface {
	DecodeUsage(member []byte) (Usage, error)
}

// TranslationChecker is implemented by codecs whose requests may hold
// what no other format carries (a reference to what their provider keeps:
// earlier turns, a file): CheckTranslation refuses such a request, with
// an *Error of kind ErrorInvalidRequest naming the field, before it is
// translated to another format, which would drop it unseen.
type TranslationChecker interface {
	CheckTranslation(req *Request) error
}

// TokenCounter is implemented by codecs whose format can count a request's
// input tokens (Anthropic count_tokens, Gemini countTokens).
type TokenCounter interface {
	// CountPath is the upstream path that counts tokens for model.
	CountPath(model string) string
	// DecodeCountRequest reads a client's count request.
	DecodeCountRequest(body []byte) (*Request, error)
	// EncodeCountRequest writes req as an upstream count request.
	EncodeCountRequest(req *Request) ([]byte, error)
	// DecodeCountResponse reads an upstream's count.
	DecodeCountResponse(body []byte) (int, error)
	// EncodeCountResponse writes a count for a client.
	EncodeCountResponse(tokens int) []byte
}

// BytesPerToken is what the estimates count a token as: four bytes of
// text, the providers' own rule of thumb for English text and about what
// source code comes to (denser text, CJK, is fewer bytes a token: there
// the estimates run low).
const BytesPerToken = 4

// EstimateTokens is a rough count of a request's input tokens (see
// BytesPerToken) for when no upstream can count.
func EstimateTokens(req *Request) int {
	n := 0
	add := func(ps []Part) {
		for i := range ps {
			p := &ps[i]
			n += len(p.Text) + len(p.Arguments) + len(p.Name)
			for j := range p.Content {
				n += len(p.Content[j].Text)
			}
			if p.Type == PartImage {
				n += 4 * 1600 // Anthropic's figure for a large image
			}
		}
	}
	add(req.System)
	for i := range req.Messages {
		add(req.Messages[i].Parts)
	}
	for i := range req.Tools {
		n += len(req.Tools[i].Name) + len(req.Tools[i].Description) + len(req.Tools[i].Parameters)
	}
	return (n + BytesPerToken - 1) / BytesPerToken
}

// EstimateOutputTokens is a rough count of the tokens a response's content
// took (see BytesPerToken): its text, thinking and tool calls. Reasoning a
// provider hides (only its signature comes) is not counted.
func EstimateOutputTokens(r *Response) int {
	n := 0
	for i := range r.Content {
		p := &r.Content[i]
		n += len(p.Text) + len(p.Arguments) + len(p.Name)
	}
	return (n + BytesPerToken - 1) / BytesPerToken
}
