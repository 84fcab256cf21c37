package wire

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote returns the string a raw JSON string value stands for; ok is
// false when v is not a well-formed string. It is the stream decoders'
// fast path: most deltas need no unescaping at all.
func Unquote(v []byte) (s string, ok bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	v = v[1 : len(v)-1]
	plain := true
	for _, c := range v {
		if c == '\\' || c == '"' || c < 0x20 {
			plain = false
			break
		}
	}
	if plain && utf8.Valid(v) {
		return string(v), true
	}
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(v[i:])
			out = utf8.AppendRune(out, r) // invalid bytes become U+FFFD, as in encoding/json
			i += size - 1
			continue
		case c != '\\':
			out = append(out, c)
			continue
		}
		i++
		if i >= len(v) {
			return "", false
		}
		switch v[i] {
		case '"', '\\', '/':
			out = append(out, v[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(v[i+1:])
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				// A pair is two escapes; a lone half is U+FFFD, as encoding/json has it.
				if i+6 < len(v) && v[i+1] == '\\' && v[i+2] == 'u' {
					if r2, ok := hex4(v[i+3:]); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							out = utf8.AppendRune(out, d)
							i += 6
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return string(out), true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Int reads a raw JSON integer.
func Int(v []byte) (int, bool) {
	n, err := strconv.Atoi(string(v))
	return n, err == nil
}
