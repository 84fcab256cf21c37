package redact

import (
	"fmt"
	"strings"
	"testing"
)

// sensitive are the names FuzzRedact hides a secret under, before it
// changes their case, encodes them and wraps them.
var sensitive = []string{
	"key", "api_key", "api-key", "apikey", "apiKey", "token", "access_token", "refresh_token", "authorization",
	"x-api-key", "x-goog-api-key", "secret", "client_secret", "password", "passwd", "pwd", "pass", "pw", "sig",
	"X-Amz-Signature", "X-Amz-Security-Token", "cookie", "credentials", "bearer",
}

// FuzzRedact: whatever surrounds it, a secret given as the value of a
// sensitive name is in nothing URL, Text or Values return, nor either end
// of it. The input is built from fuzzed parts around a secret between
// known markers, so that the property can be checked: what comes before
// (any bytes but '%', which would join the name's first letters in an
// escape), the character that ends it, the name's case and escapes, what
// wraps the name (brackets, quotes: key[], "token"), how the '=' is
// written (=, %3D, %253D), the secret's own bytes (but '&' and spaces,
// which end a value in any parser) and what follows it.
func FuzzRedact(f *testing.F) {
	f.Add("/v1beta/models/m:generateContent", uint8(1), uint8(0), uint64(0), uint64(0), uint8(0), uint8(0), "", uint8(1), "x=%zz") // issue 31
	f.Add("alt=sse", uint8(0), uint8(1), uint64(0xff), uint64(0), uint8(0), uint8(0), "abc", uint8(0), "")
	f.Add("https://h/p?x=1", uint8(2), uint8(2), uint64(0), uint64(0x5), uint8(2), uint8(1), "%zz", uint8(2), "alt=sse")
	f.Add("x=1%26", uint8(0), uint8(3), uint64(0), uint64(0), uint8(0), uint8(0), "=;#?", uint8(3), "key")
	f.Add(`url="`, uint8(9), uint8(4), uint64(3), uint64(0), uint8(0), uint8(2), "\"quote\x00\xff", uint8(0), "")
	f.Add("data", uint8(3), uint8(5), uint64(0), uint64(1<<63), uint8(1), uint8(0), "[redacted]", uint8(1), "#frag")
	f.Add("//user", uint8(10), uint8(6), uint64(0), uint64(0), uint8(0), uint8(0), "@host/p", uint8(1), "x=1")
	f.Add("x://a", uint8(0), uint8(0), uint64(0), uint64(0), uint8(0), uint8(0), "@host", uint8(0), "")
	f.Add("", uint8(0), uint8(0), uint64(0), uint64(0xffff), uint8(2), uint8(2), "=x", uint8(0), "")
	f.Fuzz(func(t *testing.T, before string, end, pick uint8, upper, escape uint64, wrap, eq uint8,
		body string, after uint8, rest string) {
		name := sensitive[int(pick)%len(sensitive)]
		w := wraps[int(wrap)%len(wraps)]
		name = w[0] + name + w[1]
		name = mangle(name, upper, escape)
		val := "SEKRET" + strings.Map(func(r rune) rune {
			if r == '&' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' {
				return -1
			}
			return r
		}, body) + "TERKES"
		before = strings.ReplaceAll(before, "%", "")
		for _, m := range []string{"SEKRET", "TERKES"} {
			if strings.Contains(before, m) || strings.Contains(rest, m) {
				return // the markers must be the secret's alone
			}
		}
		s := before + ends[int(end)%len(ends)] + name + []string{"=", "%3D", "%253D"}[eq%3] + val
		if a := []string{"", "&", ";", "#", " "}[after%5]; a != "" {
			s += a + rest
		}
		outs := map[string]string{"URL": URL(s), "Text": Text(s), "Values": strings.Join(Values("X-Custom", []string{s, "x"}), "\n")}
		if !strings.Contains(s, " ") {
			// A URL has no space; in text a space ends a name.
			outs["URL(Text)"] = URL("https://u:p@h" + s)
		}
		for what, out := range outs {
			if strings.Contains(out, "SEKRET") || strings.Contains(out, "TERKES") {
				t.Fatalf("%s(%q)\n = %q keeps the secret %q", what, s, out, val)
			}
		}
		if v := Values(name, []string{val}); len(v) != 1 || v[0] != Redacted {
			t.Fatalf("Values(%q, %q) = %q", name, val, v)
		}
	})
}

// ends are what end the text before a name; wraps, what wraps it.
var (
	ends  = []string{"?", "&", ";", "#", "=", " ", "\t", `"`, "'", "(", "[", "{", "<", ",", "_", "-", ".", "/", ":", "+", "\x00"}
	wraps = [][2]string{{"", ""}, {"", "[]"}, {"", "[0]"}, {"[", "]"}, {`"`, `"`}, {"'", "'"}, {"(", ")"}, {"{", "}"}, {"<", ">"}, {"`", "`"}}
)

// mangle uppercases the name's letters where upper has a bit set and
// percent-encodes its bytes where escape has, twice where escape's next
// bit is set too.
func mangle(name string, upper, escape uint64) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper>>(i%64)&1 == 1 && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		switch e := escape >> (i % 63) & 3; {
		case e&1 == 0:
			b.WriteByte(c)
		case e == 3:
			fmt.Fprintf(&b, "%%25%02X", c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
