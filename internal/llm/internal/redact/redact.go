// Package redact keeps credentials out of what the LLM proxy records and
// reports: URLs, query strings, header sets and the text of errors that
// may quote a URL.
//
// It never parses strictly, so it never gives up and hands back what it
// was given: it reads every '=' as a pair's, whose name is what precedes
// it back to an '&', ';', '?', '#' (in free text, a space too) or another
// '=', brackets and quotes included (key[]=, "token"=), and a pair whose
// name may carry a credential — a key, token, secret, password,
// signature, auth or cookie in any case and position, percent-encoded any
// number of times — loses its value up to the next '&' (or space, in
// text). A name it cannot decode is taken to be such a name, and so is a
// header name that is not one; what decodes to such a pair (key%3Dsecret)
// goes whole. A URL's userinfo goes whole. Redacting more than was needed
// is the price of never redacting less.
//
// Its functions are safe for concurrent use; they allocate only when
// there is something to redact.
package redact

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Redacted stands for what was removed.
const Redacted = "[redacted]"

// URL returns u — an absolute URL, a request URI or a bare query string —
// with its userinfo and the value of every parameter of a sensitive name
// (in the query, a fragment or a ';'-separated pair, wherever it stands)
// replaced by Redacted. Everything else is kept byte for byte.
func URL(u string) string { return scrub(u, false) }

// Text returns s, free text such as an error's message, with what URL
// redacts redacted from every URL or name=value pair in it. A value ends
// at the next '&' or space.
func Text(s string) string { return scrub(s, true) }

// Header returns a copy of h in which the values of sensitive headers
// are Redacted and the others as Text makes them.
func Header(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		out[k] = Values(k, vs)
	}
	return out
}

// Values returns a header's values as Header keeps them: vs itself when
// nothing is redacted, a single Redacted when the header's name is
// sensitive or is not a header name.
func Values(name string, vs []string) []string {
	if vs == nil {
		return nil
	}
	if sensitiveHeader(name) {
		return []string{Redacted}
	}
	var out []string
	for i, v := range vs {
		r := Text(v)
		if r != v && out == nil {
			out = append(make([]string, 0, len(vs)), vs[:i]...)
		}
		if out != nil {
			out = append(out, r)
		}
	}
	if out == nil {
		return vs
	}
	return out
}

// known caches sensitiveHeader's answers: header names repeat on every
// request, and Name costs about 150 ns. It stops growing at maxKnown
// names, which are the clients' to choose.
var (
	known  sync.Map // name → bool
	nKnown atomic.Int64
)

const maxKnown = 1024

// sensitiveHeader reports whether a header's values are to go whole: its
// name is sensitive, or is not a header name.
func sensitiveHeader(name string) bool {
	if v, ok := known.Load(name); ok {
		return v.(bool)
	}
	s := !headerName(name) || Name(name)
	if nKnown.Load() < maxKnown {
		nKnown.Add(1)
		known.Store(name, s)
	}
	return s
}

// headerName reports whether name is made of the visible ASCII
// characters a header name can have.
func headerName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	return true
}

// Name reports whether a query parameter or header of this name may
// carry a credential. The name is percent-decoded (repeatedly, '+' as a
// space), letters that case-fold to ASCII ones are folded, and what is
// left of it in ASCII letters and digits, lowercased, is sensitive when it
// contains key, secret, passw, passphrase, pwd, auth, credential, cookie,
// signature, bearer, jwt or token — but for the tokens that end a word
// (the rate-limit headers count tokens: x-ratelimit-remaining-tokens);
// or when one of the name's words is pass, pw or sig. A name that cannot
// be decoded is sensitive.
func Name(name string) bool {
	n, ok := decode(name)
	if !ok {
		return true
	}
	n = foldASCII(n)
	var buf [64]byte
	flat := buf[:0] // the name's letters and digits, lowercased
	start := 0      // of the current word
	counts := 0     // words that end in tokens
	for i := 0; i <= len(n); i++ {
		if i < len(n) && alnum(n[i]) {
			c := n[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			flat = append(flat, c)
			continue
		}
		switch w := n[start:i]; len(w) {
		case 2, 3, 4:
			if eqFold(w, "pass") || eqFold(w, "pw") || eqFold(w, "sig") {
				return true
			}
		default:
			if len(w) >= len("tokens") && eqFold(w[len(w)-len("tokens"):], "tokens") {
				counts++
			}
		}
		start = i + 1
	}
	for _, s := range substrings {
		if bytes.Contains(flat, s) {
			return true
		}
	}
	// Any other token is one: token_sign, to-kens, tokenstore.
	return bytes.Count(flat, []byte("token")) > counts
}

var substrings = [][]byte{
	[]byte("key"), []byte("secret"), []byte("passw"), []byte("passphrase"), []byte("pwd"), []byte("auth"),
	[]byte("credential"), []byte("cookie"), []byte("signature"), []byte("bearer"), []byte("jwt"),
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// eqFold is strings.EqualFold for an ASCII word.
func eqFold(w, word string) bool {
	if len(w) != len(word) {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[i] {
			return false
		}
	}
	return true
}

// foldASCII replaces each non-ASCII letter that case-folds to an ASCII
// one (the Kelvin sign K, the long s ſ) by it, as a server comparing
// names with strings.EqualFold would. Other non-ASCII characters are
// left, and separate words without standing in one: k\u200bey is key.
func foldASCII(s string) string {
	ascii := true
	for i := 0; i < len(s) && ascii; i++ {
		ascii = s[i] < utf8.RuneSelf
	}
	if ascii {
		return s
	}
	return strings.Map(func(r rune) rune {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < utf8.RuneSelf {
				return f
			}
		}
		return r
	}, s)
}

// maxDecode bounds how many times a name is percent-decoded: one more
// layer than that and the name is not understood.
const maxDecode = 4

// decode percent-decodes s until nothing is left to decode, with '+' as a
// space; ok is false when an escape is malformed or layers remain.
func decode(s string) (string, bool) {
	s = strings.ReplaceAll(s, "+", " ")
	for range maxDecode {
		if strings.IndexByte(s, '%') < 0 {
			return s, true
		}
		b := make([]byte, 0, len(s))
		for i := 0; i < len(s); i++ {
			if s[i] != '%' {
				b = append(b, s[i])
				continue
			}
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", false
			}
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		}
		s = strings.ReplaceAll(string(b), "+", " ")
	}
	return s, strings.IndexByte(s, '%') < 0
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// separator reports whether c ends a name: the separators of queries
// and fragments, and in text a space. Brackets, quotes and the like do
// not (key[]=, "token"=, (password=): they stand in a name and Name
// reads past them.
func separator(c byte, text bool) bool {
	switch c {
	case '&', ';', '?', '#':
		return true
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return text
	}
	return false
}

// boundary reports whether c ends a URL's authority in text, beside '/',
// '?' and '#': what ends a word.
func boundary(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f', '"', '\'', '`', '<', '>', '(', ')', '[', ']', '{', '}', ',':
		return true
	}
	return false
}

// valueEnd returns where the value starting at i ends: at the next '&',
// or in text at the next space too. A value runs over ';', '?' and '#',
// which some parsers take as part of it.
func valueEnd(s string, i int, text bool) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '&':
			return i
		case ' ', '\t', '\n', '\r', '\v', '\f':
			if text {
				return i
			}
		}
	}
	return i
}

// closing is what may follow a value that is already Redacted in text
// (a URL's closing quote, a colon) and is kept: no secret is made of it.
const closing = "\"'`>)]},.:;"

func scrub(s string, text bool) string {
	if strings.IndexByte(s, '=') < 0 && strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '@') < 0 {
		return s // the usual header value, path or message: nothing to look at
	}
	// Pairs first, then userinfo on its own: a URL can stand in a pair's
	// value, and an authority can hold what looks like pairs.
	return userinfos(pairs(s, text), text)
}

// cutter builds a copy of s with parts replaced by Redacted, only once
// one is.
type cutter struct {
	s    string
	out  []byte
	last int // s[last:] is not yet in out
}

func (c *cutter) cut(from, to int) {
	if c.out == nil {
		c.out = make([]byte, 0, len(c.s)+len(Redacted))
	}
	c.out = append(append(c.out, c.s[c.last:from]...), Redacted...)
	c.last = to
}

func (c *cutter) String() string {
	if c.out == nil {
		return c.s
	}
	return string(append(c.out, c.s[c.last:]...))
}

// userinfos redacts the userinfo of every URL in s: the authority after
// a "://", and after a "//" that starts s or, in text, a word (a
// network-path reference, //user:pass@host/p).
func userinfos(s string, text bool) string {
	c := cutter{s: s}
	for i := 0; ; {
		k := strings.Index(s[i:], "//")
		if k < 0 {
			return c.String()
		}
		k += i
		i = k + len("//")
		if k > 0 && s[k-1] != ':' && !(text && boundary(s[k-1])) {
			continue
		}
		if from, to := userinfo(s, i, text); to > from {
			c.cut(from, to)
			i = to
		}
	}
}

// pairs redacts the values of the sensitive name=value pairs in s. Every
// '=' is read as one's: its name is what precedes it back to a separator
// or another '=' (in x=1%26key=secret a parser that decodes before it
// splits sees key). What follows a separator and has no '=' (key%3Dsecret,
// a value's last part: x=1%26key%3Dsecret) is looked at decoded, and goes
// whole if it decodes to sensitive pairs.
func pairs(s string, text bool) string {
	c := cutter{s: s}
	start := 0 // of the current name: after a separator or an '='
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '=' && !separator(s[i], text) {
			continue
		}
		run := s[start:i]
		if strings.IndexByte(run, '%') >= 0 && encodedPair(run, text) {
			// key%3Dsecret, key%3Dsecret=…: the pair goes whole, up to
			// where a value would end.
			to := valueEnd(s, i, text)
			c.cut(start, to)
			i, start = to, to+1
			continue
		}
		if i == len(s) || s[i] != '=' || !Name(run) {
			start = i + 1
			continue
		}
		from, to := i+1, valueEnd(s, i+1, text)
		if v := s[from:to]; text && strings.HasPrefix(v, Redacted) && strings.Trim(v[len(Redacted):], closing) == "" {
			// Redacted before (the proxy's own messages are).
		} else if v != Redacted {
			c.cut(from, to)
		}
		i, start = to, to+1
	}
	return c.String()
}

// encodedPair reports whether pair, which has no '=', decodes to pairs
// of which one is sensitive, or does not decode but may hide a '='.
func encodedPair(pair string, text bool) bool {
	d, ok := decode(pair)
	if !ok {
		return strings.Contains(strings.ToLower(pair), "%3d") || strings.Contains(pair, "%25")
	}
	// d has no escapes left: this goes no deeper.
	return strings.IndexByte(d, '=') >= 0 && pairs(d, text) != d
}

// userinfo returns the bounds of the userinfo of the URL whose authority
// starts at i (after "://"), from == to when it has none. The authority
// ends at '/', '?' or '#', in text at a space or quote too; its userinfo
// is what precedes its last '@'.
func userinfo(s string, i int, text bool) (from, to int) {
	from, to = i, i
	for j := i; j < len(s); j++ {
		switch c := s[j]; c {
		case '/', '?', '#':
			return from, to
		case '@':
			to = j
		default:
			if text && boundary(c) {
				return from, to
			}
		}
	}
	return from, to
}
