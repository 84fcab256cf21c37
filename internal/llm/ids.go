package llm

import "math/rand/v2"

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns prefix followed by 24 random letters and digits, the shape
// of the ids the providers issue (msg_…, call_…, resp_…). The ids name
// messages and tool calls; they are not secrets.
func NewID(prefix string) string {
	b := make([]byte, len(prefix)+24)
	copy(b, prefix)
	for i := len(prefix); i < len(b); i++ {
		b[i] = idAlphabet[rand.IntN(len(idAlphabet))]
	}
	return string(b)
}
