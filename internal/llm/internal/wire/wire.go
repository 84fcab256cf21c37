// Package wire holds the small JSON tools the LLM codecs share: walking the
// top-level members of an object without decoding it, appending JSON
// strings without reflection for the hot stream paths, data URLs, and
// replacing the model name of a body in place for pass-through.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agent2env/agent2env/internal/llm"
)

// ErrSyntax is returned for JSON the scanner cannot walk.
var ErrSyntax = errors.New("malformed JSON")

// Members calls fn for each member of the JSON object data, in order, with
// the key unquoted and the value's raw bytes. It validates only what it
// needs to find the members' bounds.
func Members(data []byte, fn func(key string, value []byte) error) error {
	return members(data, func(key string, _, start, end int) error { return fn(key, data[start:end]) })
}

// members calls fn with each member's key, the index of the key's opening
// quote and the bounds of its value.
func members(data []byte, fn func(key string, kstart, start, end int) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return ErrSyntax
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return ErrSyntax
		}
		kstart := i
		kend, err := skipString(data, i)
		if err != nil {
			return err
		}
		key, err := unquote(data[i:kend])
		if err != nil {
			return err
		}
		i = skipSpace(data, kend)
		if i >= len(data) || data[i] != ':' {
			return ErrSyntax
		}
		vstart := skipSpace(data, i+1)
		vend, err := skipValue(data, vstart, 0)
		if err != nil {
			return err
		}
		if err := fn(key, kstart, vstart, vend); err != nil {
			return err
		}
		i = skipSpace(data, vend)
		if i >= len(data) {
			return ErrSyntax
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return nil
		default:
			return ErrSyntax
		}
	}
}

func unquote(s []byte) (string, error) {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s[1 : len(s)-1]), nil
	}
	var out string
	if err := json.Unmarshal(s, &out); err != nil {
		return "", ErrSyntax
	}
	return out, nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at data[i].
// It jumps from quote to quote (IndexByte is vectorized) and counts the
// backslashes before each to tell an escaped quote from the end.
func skipString(data []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return 0, ErrSyntax
		}
		j += k
		n := 0
		for b := j - 1; b > i && data[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

const maxDepth = 10000

// skipValue returns the index just past the value starting at data[i].
func skipValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) || depth > maxDepth {
		return 0, ErrSyntax
	}
	switch c := data[i]; {
	case c == '"':
		return skipString(data, i)
	case c == '{' || c == '[':
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		j := skipSpace(data, i+1)
		if j < len(data) && data[j] == close {
			return j + 1, nil
		}
		for {
			if c == '{' {
				if j >= len(data) || data[j] != '"' {
					return 0, ErrSyntax
				}
				k, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = skipSpace(data, k)
				if j >= len(data) || data[j] != ':' {
					return 0, ErrSyntax
				}
				j = skipSpace(data, j+1)
			}
			k, err := skipValue(data, j, depth+1)
			if err != nil {
				return 0, err
			}
			j = skipSpace(data, k)
			if j >= len(data) {
				return 0, ErrSyntax
			}
			if data[j] == close {
				return j + 1, nil
			}
			if data[j] != ',' {
				return 0, ErrSyntax
			}
			j = skipSpace(data, j+1)
		}
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return 0, ErrSyntax
				}
				return j, nil
			}
			j++
		}
		if j == i {
			return 0, ErrSyntax
		}
		return j, nil
	}
}

// Field is an alias of llm.Field for W.Extra.
type Field = llm.Field

// Extra collects the members of data whose keys known rejects, for
// Request.Extra.
func Extra(f llm.Format, data []byte, known func(string) bool) (llm.Extra, error) {
	var fields []llm.Field
	err := Members(data, func(key string, value []byte) error {
		if !known(key) {
			fields = append(fields, llm.Field{Name: key, Value: bytes.Clone(value)})
		}
		return nil
	})
	if len(fields) == 0 {
		return llm.Extra{}, err
	}
	return llm.Extra{Format: f, Fields: fields}, err
}

// MergeExtra returns body (a JSON object) with fields added after its
// members, except those whose names it already has.
func MergeExtra(body []byte, fields []llm.Field) []byte {
	if len(fields) == 0 {
		return body
	}
	have := map[string]bool{}
	_ = Members(body, func(key string, _ []byte) error { have[key] = true; return nil })
	end := bytes.LastIndexByte(body, '}')
	if end < 0 {
		return body
	}
	out := append([]byte(nil), body[:end]...)
	empty := len(have) == 0
	for _, f := range fields {
		if have[f.Name] || len(f.Value) == 0 {
			continue
		}
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = AppendString(out, f.Name)
		out = append(out, ':')
		out = append(out, f.Value...)
	}
	return append(out, body[end:]...)
}

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string. Unlike encoding/json it does
// not escape <, > and &; invalid UTF-8 becomes U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendInt appends n.
func AppendInt(dst []byte, n int) []byte { return strconv.AppendInt(dst, int64(n), 10) }

// Marshal is json.Marshal without HTML escaping and without the trailing
// newline of an Encoder.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil
}

// ParseDataURL splits "data:<media type>;base64,<data>"; ok is false for
// anything else (an http URL).
func ParseDataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mediaType, found = strings.CutSuffix(meta, ";base64")
	if !found {
		return "", "", false
	}
	return mediaType, data, true
}

// DataURL is the data URL of an image part (or its URL).
func DataURL(p *llm.Part) string {
	if p.URL != "" {
		return p.URL
	}
	return "data:" + p.MediaType + ";base64," + p.Data
}

// ImagePart is the image part of a URL that may be a data URL.
func ImagePart(u string) llm.Part {
	if mt, data, ok := ParseDataURL(u); ok {
		return llm.Part{Type: llm.PartImage, MediaType: mt, Data: data}
	}
	return llm.Part{Type: llm.PartImage, URL: u}
}

// ArgumentsObject is a tool call's arguments as a JSON object, for formats
// that carry objects rather than text: "{}" when empty, the text itself
// when it is an object, else the text wrapped as {"arguments": text} so
// that nothing is lost.
func ArgumentsObject(args string) json.RawMessage {
	t := strings.TrimSpace(args)
	if t == "" {
		return json.RawMessage("{}")
	}
	if t[0] == '{' && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return json.RawMessage(append(AppendString([]byte(`{"arguments":`), args), '}'))
}

// ReplaceModel returns body with the value of its top-level "model" member
// replaced by model, every other byte unchanged; ok is false when the body
// has no such string member.
func ReplaceModel(body []byte, model string) (out []byte, ok bool) {
	start, end := -1, -1
	_ = members(body, func(key string, _, s, e int) error {
		if key == "model" && body[s] == '"' {
			start, end = s, e
			return errStop
		}
		return nil
	})
	if start < 0 {
		return body, false
	}
	out = make([]byte, 0, len(body)+len(model))
	out = append(out, body[:start]...)
	out = AppendString(out, model)
	return append(out, body[end:]...), true
}

var errStop = errors.New("stop")

// SetMember returns the JSON object data with its top-level member key set
// to the raw value: replaced where data has it (the last, as encoding/json
// reads it), else added at the end; every other byte unchanged. ok is false
// when data is not an object.
func SetMember(data []byte, key string, value []byte) (out []byte, ok bool) {
	start, end, n := -1, -1, 0
	err := members(data, func(k string, _, s, e int) error {
		n++
		if k == key {
			start, end = s, e
		}
		return nil
	})
	if err != nil {
		return data, false
	}
	out = make([]byte, 0, len(data)+len(key)+len(value)+4)
	if start >= 0 {
		out = append(append(out, data[:start]...), value...)
		return append(out, data[end:]...), true
	}
	close := bytes.LastIndexByte(data, '}')
	out = append(out, data[:close]...)
	if n > 0 {
		out = append(out, ',')
	}
	out = append(AppendString(out, key), ':')
	out = append(append(out, value...), data[close:]...)
	return out, true
}

// DeleteMember returns the JSON object data without its top-level members
// named key, with the comma that separated each; every other byte
// unchanged. ok is false when data is not an object.
func DeleteMember(data []byte, key string) (out []byte, ok bool) {
	type span struct{ from, to int }
	var cut []span
	prevEnd := -1 // the end of the previous member's value
	err := members(data, func(k string, ks, _, e int) error {
		switch {
		case k != key:
		case prevEnd >= 0: // with the comma before it
			cut = append(cut, span{prevEnd, e})
		default: // the first member left: with the comma after it, if any
			to := skipSpace(data, e)
			if to < len(data) && data[to] == ',' {
				to = skipSpace(data, to+1)
			}
			cut = append(cut, span{ks, to})
			return nil
		}
		prevEnd = e
		return nil
	})
	if err != nil {
		return data, false
	}
	if len(cut) == 0 {
		return data, true
	}
	out = make([]byte, 0, len(data))
	at := 0
	for _, c := range cut {
		out = append(out, data[at:c.from]...)
		at = c.to
	}
	return append(out, data[at:]...), true
}

// Lookup returns the raw value of the top-level member key of data, or nil.
func Lookup(data []byte, key string) []byte {
	var found []byte
	_ = Members(data, func(k string, value []byte) error {
		if k == key {
			found = value
			return errStop
		}
		return nil
	})
	return found
}

// Elements calls fn for each element of the JSON array data, with its raw
// bytes.
func Elements(data []byte, fn func(i int, value []byte) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return ErrSyntax
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return nil
	}
	for n := 0; ; n++ {
		end, err := skipValue(data, i, 0)
		if err != nil {
			return err
		}
		if err := fn(n, data[i:end]); err != nil {
			return err
		}
		i = skipSpace(data, end)
		if i >= len(data) {
			return ErrSyntax
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return nil
		default:
			return ErrSyntax
		}
	}
}

// At returns a copy of the raw value found by walking path (strings are
// object keys, ints array indices) from data, or nil. Decoders use it to
// keep, as they came, the few values they cannot model.
func At(data []byte, path ...any) json.RawMessage {
	for _, step := range path {
		var found []byte
		switch s := step.(type) {
		case string:
			found = Lookup(data, s)
		case int:
			_ = Elements(data, func(i int, v []byte) error {
				if i == s {
					found = v
					return errStop
				}
				return nil
			})
		}
		if found == nil {
			return nil
		}
		data = found
	}
	return bytes.Clone(data)
}
