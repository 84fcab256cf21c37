package httpapi

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/agent2env/agent2env/api"
)

// Command output runs to megabytes per stream. encoding/json would encode
// a response into one buffer, growing it by doubling (and escaping can make
// it six times the text): several times the output's own memory for every
// execution answered at once. writeJSONText writes the same bytes with the
// output strings escaped straight onto the connection, piece by piece.

// textHole is put in place of each output string while the rest of the
// response is encoded: a per-process random token, which no other field
// can be expected to hold.
var textHole = func() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "a2e-text-" + hex.EncodeToString(b[:]) + "-"
}()

// textChunk is how much of an output string is escaped at a time.
const textChunk = 32 << 10

// writeJSONText is writeJSON for a response v whose fields texts point to
// may be large: it encodes v with each of them replaced by a placeholder
// and writes them, escaped as encoding/json does, where the placeholders
// are.
func writeJSONText(w http.ResponseWriter, status int, v any, texts ...*string) {
	writeJSONOutput(w, status, v, "", texts...)
}

// writeExecJSON is writeJSONText for an execution's response, whose output
// the service gives as it came: it writes stdout and stderr in the
// encoding the request asked for (enc, an ExecRequest's OutputEncoding),
// marking the response so, base64 made piece by piece onto the connection
// rather than in a copy of 4/3 the output.
func writeExecJSON(w http.ResponseWriter, v any, res *api.ExecResponse, enc string) {
	if enc == api.OutputBase64 {
		res.Encoding = api.OutputBase64
	}
	writeJSONOutput(w, http.StatusOK, v, res.Encoding, &res.Stdout, &res.Stderr)
}

// writeJSONOutput is writeJSONText writing texts in encoding enc: base64
// (api.OutputBase64), or JSON-escaped text ("").
func writeJSONOutput(w http.ResponseWriter, status int, v any, enc string, texts ...*string) {
	saved := make([]string, len(texts))
	for i, p := range texts {
		saved[i], *p = *p, textHole+strconv.Itoa(i)
	}
	b, err := json.Marshal(v)
	for i, p := range texts {
		*p = saved[i]
	}
	var parts [][]byte
	if err == nil {
		parts = splitHoles(b, len(texts))
	}
	if parts == nil { // cannot happen with the API's types
		writeJSON(w, status, v)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	bw := bufio.NewWriterSize(w, textChunk)
	for i, part := range parts {
		bw.Write(part)
		switch {
		case i >= len(saved):
		case enc == api.OutputBase64:
			writeBase64String(bw, saved[i])
		default:
			writeJSONString(bw, saved[i])
		}
	}
	bw.WriteByte('\n') // as json.Encoder ends a value
	_ = bw.Flush()
}

// splitHoles cuts encoded JSON at the n placeholders, in order, dropping
// them; nil if they are not all there.
func splitHoles(b []byte, n int) [][]byte {
	parts := make([][]byte, 0, n+1)
	for i := range n {
		hole := []byte(`"` + textHole + strconv.Itoa(i) + `"`)
		j := bytes.Index(b, hole)
		if j < 0 {
			return nil
		}
		parts = append(parts, b[:j])
		b = b[j+len(hole):]
	}
	return append(parts, b)
}

// writeJSONString writes s as a JSON string, escaped exactly as
// json.Marshal escapes it, a chunk at a time. Chunks end on character
// boundaries, so invalid bytes are replaced as they would be in one piece.
func writeJSONString(w io.Writer, s string) {
	_, _ = io.WriteString(w, `"`)
	for len(s) > 0 {
		cut := min(len(s), textChunk)
		if cut < len(s) {
			// Back to the start of the character s[cut] is in, if any.
			for i := cut; i > cut-utf8.UTFMax; i-- {
				if utf8.RuneStart(s[i]) {
					cut = i
					break
				}
			}
		}
		q, _ := json.Marshal(s[:cut])
		_, _ = w.Write(q[1 : len(q)-1])
		s = s[cut:]
	}
	_, _ = io.WriteString(w, `"`)
}

// writeBase64String writes the bytes of s as a JSON string of their
// standard base64 (whose characters need no escaping), a chunk at a time.
func writeBase64String(w io.Writer, s string) {
	_, _ = io.WriteString(w, `"`)
	enc := base64.NewEncoder(base64.StdEncoding, w)
	for len(s) > 0 {
		cut := min(len(s), textChunk)
		_, _ = enc.Write([]byte(s[:cut]))
		s = s[cut:]
	}
	_ = enc.Close()
	_, _ = io.WriteString(w, `"`)
}
