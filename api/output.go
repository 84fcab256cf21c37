package api

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// The output encodings of ExecRequest.OutputEncoding. JSON strings carry
// only text, so the default replaces each byte of a command's output that
// is not UTF-8 with U+FFFD, as LiteBoxd does; base64 carries any bytes.
const (
	// OutputText is the default: output as UTF-8 text.
	OutputText = "utf-8"
	// OutputBase64 is output as the standard base64 (RFC 4648, padded)
	// of its bytes.
	OutputBase64 = "base64"
)

// CheckOutputEncoding returns an error naming enc unless it is empty,
// OutputText or OutputBase64.
func CheckOutputEncoding(enc string) error {
	switch enc {
	case "", OutputText, OutputBase64:
		return nil
	}
	return fmt.Errorf("output_encoding %q: want %q or %q", enc, OutputText, OutputBase64)
}

// EncodeOutput returns out, bytes held in a string, in the encoding enc
// asks for, and the Encoding that marks it: its base64 and OutputBase64
// for OutputBase64, else out itself, unmarked (its invalid UTF-8 is
// replaced when it is written as JSON), as LiteBoxd's output is. A large
// out is encoded a piece at a time, never copied whole.
func EncodeOutput(out, enc string) (data, encoding string) {
	if enc != OutputBase64 {
		return out, ""
	}
	enc64 := base64.StdEncoding
	var b strings.Builder
	b.Grow(enc64.EncodedLen(len(out)))
	var in [3 << 10]byte // a multiple of 3: only the last piece is padded
	var piece [4 << 10]byte
	for len(out) > 0 {
		n := copy(in[:], out)
		enc64.Encode(piece[:], in[:n])
		b.Write(piece[:enc64.EncodedLen(n)])
		out = out[n:]
	}
	return b.String(), OutputBase64
}

// DecodeOutput returns the bytes of output s that came in encoding enc (an
// Encoding field): s decoded from base64 for OutputBase64, s itself for
// text.
func DecodeOutput(s, enc string) (string, error) {
	switch enc {
	case "", OutputText:
		return s, nil
	case OutputBase64:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "", fmt.Errorf("decode base64 output: %w", err)
		}
		return string(b), nil
	}
	return "", fmt.Errorf("output in unknown encoding %q", enc)
}
