package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// sensitiveNames are the names FuzzRedactMeta hides a secret under,
// before it changes their case, encodes them and adds a word.
var sensitiveNames = []string{
	"key", "api_key", "api-key", "apiKey", "token", "access_token", "refresh_token", "authorization", "x-api-key",
	"x-goog-api-key", "secret", "client_secret", "password", "passwd", "pwd", "pass", "sig", "X-Amz-Signature",
	"X-Amz-Security-Token", "cookie", "credentials",
}

// FuzzRedactMeta: whatever surrounds it, a secret given as the value of a
// sensitive parameter — in the client's path, the upstream's URL, the
// error that quotes it, a header's value — or as a sensitive header's
// value, is in no meta the archive writes, nor either end of it. The
// query is built from fuzzed parts around a secret between known markers,
// so that the property can be checked: text around it, the separator
// before the name, the name's case, escapes and an added word, the
// secret's own bytes (but '&' and spaces, which end a value in any
// parser) and what follows it.
func FuzzRedactMeta(f *testing.F) {
	f.Add("alt=sse", uint8(0), "", uint64(0), uint64(0), false, uint8(0), "", uint8(0), "x=%zz") // issue 31
	f.Add("", uint8(1), "", uint64(0), uint64(0), false, uint8(1), "abc", uint8(1), "")
	f.Add("x=%zz", uint8(3), "my", uint64(5), uint64(0), false, uint8(2), "%zz", uint8(2), "alt=sse")
	f.Add("%", uint8(5), "", uint64(0xff), uint64(0x3), true, uint8(3), "=;#?", uint8(3), "key")
	f.Add("a=1;b", uint8(9), "x", uint64(0), uint64(0xffff), false, uint8(4), "\"quote\x00\xff", uint8(0), "")
	f.Add("key%3D", uint8(15), "", uint64(1), uint64(0), true, uint8(0), "[redacted]", uint8(1), "#frag")
	f.Add("", uint8(2), "", uint64(0), uint64(0), false, uint8(0), "://user@host/p", uint8(1), "x=1")
	f.Add("x://a", uint8(0), "", uint64(0), uint64(0), false, uint8(0), "@host", uint8(0), "")
	f.Fuzz(func(t *testing.T, before string, pick uint8, word string, upper, escape uint64, twice bool,
		sep uint8, body string, after uint8, rest string) {
		name := sensitiveNames[int(pick)%len(sensitiveNames)]
		if w := strings.Map(alnumOnly, word); w != "" {
			name = w + "_" + name
		}
		name = mangle(name, upper, escape, twice)
		val := "SEKRET" + strings.Map(func(r rune) rune {
			if r == '&' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' {
				return -1
			}
			return r
		}, body) + "TERKES"
		for _, m := range []string{"SEKRET", "TERKES"} {
			if strings.Contains(before, m) || strings.Contains(rest, m) || strings.Contains(word, m) {
				return // the markers must be the secret's alone
			}
		}
		query := before + string("&;?#"[sep%4]) + name + "=" + val
		if after%3 > 0 {
			query += string("&;#"[after%3]) + rest
		}
		path := "/v1beta/models/m:generateContent?" + query
		x := store.LLMExchange{ID: "llx_1", Method: "POST", Path: path,
			Error: fmt.Sprintf("call provider up: Post %q: dial tcp: connection refused", "https://up"+path)}
		h := http.Header{name: {val}, "Referer": {"https://h" + path}, "X-Custom": {query}}
		for _, meta := range [][]byte{
			appendExMeta(nil, &x),
			appendBeginMeta(nil, &x, h),
			appendHTTPMeta(nil, "POST", "https://up"+path, 0, h),
			appendHTTPMeta(nil, "", "", 200, h),
		} {
			// Neither end of the secret: the markers are its first and
			// last bytes.
			if bytes.Contains(meta, []byte("SEKRET")) || bytes.Contains(meta, []byte("TERKES")) {
				t.Fatalf("the secret %q is in\n%s", val, meta)
			}
		}
	})
}

func alnumOnly(r rune) rune {
	if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
		return r
	}
	return -1
}

// mangle uppercases the name's letters where upper has a bit set,
// percent-encodes its bytes where escape has, and encodes the escapes
// again when twice.
func mangle(name string, upper, escape uint64, twice bool) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper>>(i%64)&1 == 1 && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		switch {
		case escape>>(i%64)&1 == 0:
			b.WriteByte(c)
		case twice:
			fmt.Fprintf(&b, "%%25%02X", c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// TestRedactOldLog: a log written before redaction failed closed keeps
// what it kept, but neither re-indexing it nor reading it back hands the
// credentials on.
func TestRedactOldLog(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := Config{Dir: filepath.Join(dir, "archive"), Log: slog.New(slog.DiscardHandler)}
	l, err := openLog(cfg.Dir, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	// As the archive wrote them: the path and URL through a redaction that
	// gave up, the header through a list that missed Api-Key.
	x := exMeta{ID: "llx_old", Method: "POST", Path: "/v1beta/models/m:generateContent?key=SEKRET&x=%zz", Model: "m;key=SEKRET",
		State: store.LLMComplete, Error: `call provider up: Post "https://up/p?key=SEKRET&x=%zz": EOF`, CreatedAt: time.Now().UnixMicro()}
	h := http.Header{"Api-Key": {"SEKRET"}, "Content-Type": {"application/json"}}
	var log []byte
	for _, r := range []record{
		{kind: kindBegin, meta: marshal(beginMeta{Exchange: x, Header: h}), data: []byte(`{}`)},
		{kind: kindUpstreamRequest, meta: marshal(httpMeta{Method: "POST", URL: "https://up/p?key=SEKRET&x=%zz", Header: h})},
		{kind: kindUpstreamResponse, meta: marshal(httpMeta{Status: 502, Header: h})},
		{kind: kindResponse, meta: marshal(httpMeta{Status: 502, Header: h})},
		{kind: kindEnd, meta: marshal(x)},
	} {
		r.id, r.at = x.ID, time.Now()
		log = appendRecord(log, &r)
	}
	if err := l.append(log, nil); err != nil {
		t.Fatal(err)
	}
	l.close()
	a, err := Open(context.Background(), cfg, st) // re-indexes the log
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got, err := a.Get(context.Background(), x.ID)
	if err != nil {
		t.Fatal(err)
	}
	read, err := a.Read(context.Background(), got)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(read)
	if bytes.Contains(b, []byte("SEKRET")) || !bytes.Contains(b, []byte("generateContent?key=[redacted]")) {
		t.Errorf("re-indexed and read back: %s", b)
	}
}
