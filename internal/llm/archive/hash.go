package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/internal/wire"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// hasher hashes the messages of requests, by which the index groups
// exchanges into conversations: a request's messages extend the previous
// request's. Each message (element of the format's messages array) is
// hashed as the codec understands it, not as its bytes: clients move
// cache markers from turn to turn and write the same content as a string
// one turn and as blocks the next. Decoding is the cost, and a request
// repeats every message before it, so each message's hash is remembered
// by its bytes and only new messages are decoded. A hasher belongs to one
// goroutine.
type hasher struct {
	known map[[sha256.Size]byte][sha256.Size]byte
}

// maxKnown bounds the remembered messages (about 100 bytes each).
const maxKnown = 200_000

func newHasher() *hasher { return &hasher{known: map[[sha256.Size]byte][sha256.Size]byte{}} }

// messagesMember is where each format keeps the messages.
var messagesMember = map[llm.Format]string{
	llm.FormatOpenAI: "messages", llm.FormatAnthropic: "messages", llm.FormatResponses: "input", llm.FormatGemini: "contents",
}

// hashes returns the hash of a request's messages, of each shorter prefix
// (longest first, at most 1000), and how many messages there are. A body
// without messages has none.
func (h *hasher) hashes(f llm.Format, body []byte) (string, []string, int) {
	member := messagesMember[f]
	if member == "" || len(body) == 0 {
		return "", nil, 0
	}
	msgs := wire.Lookup(body, member)
	if len(msgs) == 0 {
		return "", nil, 0
	}
	var elems [][]byte
	if msgs[0] == '"' { // Responses: input as one string
		elems = [][]byte{msgs}
	} else if err := wire.Elements(msgs, func(_ int, v []byte) error { elems = append(elems, v); return nil }); err != nil {
		return "", nil, 0
	}
	if len(elems) == 0 {
		return "", nil, 0
	}
	chain := make([]string, len(elems))
	var sum [sha256.Size]byte
	for i, e := range elems {
		m := h.message(f, e)
		sum = sha256.Sum256(append(sum[:], m[:]...))
		chain[i] = hex.EncodeToString(sum[:16])
	}
	n := len(chain)
	prefixes := make([]string, 0, min(n-1, 1000))
	for i := n - 2; i >= 0 && len(prefixes) < 1000; i-- {
		prefixes = append(prefixes, chain[i])
	}
	return chain[n-1], prefixes, n
}

// message is the hash of one message as its format's codec decodes it
// alone, without cache markers; of its bytes when it does not decode so.
func (h *hasher) message(f llm.Format, raw []byte) [sha256.Size]byte {
	key := sha256.Sum256(append([]byte(f+"\x00"), raw...))
	if v, ok := h.known[key]; ok {
		return v
	}
	v := key
	if req, err := proxy.Codecs[f].DecodeRequest(alone(f, raw)); err == nil {
		b, _ := json.Marshal(struct {
			System   []llm.Part
			Messages []llm.Message
		}{withoutCache(req.System), messagesWithoutCache(req.Messages)})
		v = sha256.Sum256(b)
	}
	if len(h.known) >= maxKnown {
		clear(h.known)
	}
	h.known[key] = v
	return v
}

// alone is a request of format f with the one message raw.
func alone(f llm.Format, raw []byte) []byte {
	var pre, post string
	switch f {
	case llm.FormatAnthropic:
		pre, post = `{"model":"m","max_tokens":1,"messages":[`, `]}`
	case llm.FormatOpenAI:
		pre, post = `{"model":"m","messages":[`, `]}`
	case llm.FormatResponses:
		pre, post = `{"model":"m","input":[`, `]}`
		if raw[0] == '"' {
			pre, post = `{"model":"m","input":`, `}`
		}
	case llm.FormatGemini:
		pre, post = `{"contents":[`, `]}`
	}
	b := make([]byte, 0, len(pre)+len(raw)+len(post))
	return append(append(append(b, pre...), raw...), post...)
}

func messagesWithoutCache(ms []llm.Message) []llm.Message {
	out := make([]llm.Message, len(ms))
	for i, m := range ms {
		out[i] = llm.Message{Role: m.Role, Parts: withoutCache(m.Parts)}
	}
	return out
}

func withoutCache(ps []llm.Part) []llm.Part {
	out := make([]llm.Part, len(ps))
	for i, p := range ps {
		p.CacheControl = nil
		if p.Content != nil {
			p.Content = withoutCache(p.Content)
		}
		out[i] = p
	}
	return out
}
