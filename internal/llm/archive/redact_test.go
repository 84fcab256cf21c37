package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/llm"
	"github.com/agent2env/agent2env/internal/llm/archive"
	"github.com/agent2env/agent2env/internal/llm/proxy"
)

// secret marks every credential the tests below hand the archive.
const secret = "SEKRET"

// recordSecrets writes one exchange whose client asked for target with
// header h, sent upstream to upstream.example with a password in its
// URL, whose answers carry credentials in their headers and whose call
// failed with an error quoting the upstream's URL. It returns what the
// archive keeps of it: the index record and the exchange read back, as
// JSON, and the bytes of every file under dir (the segments and the
// store's database).
func recordSecrets(t *testing.T, target string, h http.Header) (index, read, disk []byte) {
	t.Helper()
	dir := t.TempDir()
	a := openArchive(t, dir, openStore(t, dir), archive.Config{})
	req := httptest.NewRequest(http.MethodPost, target, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	upURL := "https://user:" + secret + "@upstream.example" + target
	up, err := http.NewRequest(http.MethodPost, upURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	up.Header = h.Clone()
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	ex := &proxy.Exchange{Inbound: llm.FormatGemini, Model: "m", Start: time.Now()}
	rec := a.Begin(req, body, ex)
	rec.UpstreamRequest(up, body)
	rec.UpstreamResponse(502, http.Header{"Set-Cookie": {"session=" + secret}, "X-Upstream-Token": {secret},
		"Location": {"https://upstream.example/next?access_token=" + secret}})
	rec.Response(502, http.Header{"Content-Type": {"application/json"}, "X-Echo": {"key=" + secret}})
	ex.Status = 502
	// As the proxy reports a failed call: the client's *url.Error, which
	// quotes the URL (only its password starred).
	ex.Err = llm.Errorf(llm.ErrorUpstream, "call provider up: %v",
		&url.Error{Op: "Post", URL: upURL, Err: errors.New("dial tcp: connection refused")})
	rec.End(ex)
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	x, err := a.Get(context.Background(), ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if index, err = json.Marshal(x); err != nil {
		t.Fatal(err)
	}
	full, err := a.Read(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	if read, err = json.Marshal(full); err != nil {
		t.Fatal(err)
	}
	if full.Upstream() == nil || full.Upstream().Response == nil || full.Response == nil {
		t.Fatalf("parts missing: %s", read)
	}
	return index, read, files(t, dir)
}

// files returns the bytes of every file under dir.
func files(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		all = append(all, b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// checkNoSecret fails t where the secret is kept, and where what is not a
// secret was lost with it: path (everywhere), keep (in the records).
func checkNoSecret(t *testing.T, index, read, disk []byte, path string, keep ...string) {
	t.Helper()
	for _, c := range []struct {
		what string
		b    []byte
		keep []string
	}{{"index record", index, []string{path}}, {"exchange read back", read, append(keep, path)}, {"files on disk", disk, append(keep, path)}} {
		if i := bytes.Index(c.b, []byte(secret)); i >= 0 {
			t.Errorf("%s keeps the secret: …%s…", c.what, c.b[max(0, i-80):min(len(c.b), i+40)])
		}
		for _, k := range c.keep {
			if !bytes.Contains(c.b, []byte(k)) {
				t.Errorf("%s lost %q", c.what, k)
			}
		}
	}
}

// TestRedactMalformedQuery is issue 31's case: a Gemini key in the query
// beside a malformed escape was archived in clear, in the log and the
// index, because the query did not parse.
func TestRedactMalformedQuery(t *testing.T) {
	index, read, disk := recordSecrets(t, "/v1beta/models/m:generateContent?key="+secret+"&x=%zz", nil)
	checkNoSecret(t, index, read, disk, "/v1beta/models/m:generateContent?key=[redacted]", "x=%zz")
}

// TestRedactTricky: however the query names a credential, and whatever
// header carries one, the archive keeps none of it.
func TestRedactTricky(t *testing.T) {
	for i, target := range []string{
		"/v1beta/models/m:generateContent?key=" + secret,
		"/v1beta/models/m:generateContent?KEY=" + secret + "&x=%",
		"/p?alt=sse&Key=" + secret + "&x=%zz&y=1",
		"/p?api_key=" + secret,
		"/p?api-key=" + secret + "&x=%zz",
		"/p?apiKey=" + secret,
		"/p?token=" + secret,
		"/p?access_token=" + secret + "&x=%g0",
		"/p?Authorization=Bearer%20" + secret,
		"/p?x-api-key=" + secret,
		"/p?x-goog-api-key=" + secret,
		"/p?client_secret=" + secret,
		"/p?password=" + secret,
		"/p?k%65y=" + secret,
		"/p?%6B%65%79=" + secret + "&x=%zz",
		"/p?k%2565y=" + secret,
		"/p?api+key=" + secret,
		"/p?ke%zzy=" + secret,
		"/p?alt=sse;key=" + secret,
		"/p?key=" + secret + ";alt=sse",
		"/p?key=public&key=" + secret,
		"/p?x=1#access_token=" + secret,
		"/p?x=1?key=" + secret,
		"/p?key%3D" + secret,
		"/p?%E2%84%AAey=" + secret,
		"/p?X-Amz-Signature=" + secret + "&sig=" + secret,
		"/p?key[]=" + secret + "&data[api_key]=" + secret,
		"/p?x=1%26key=" + secret + "&y=%zz",
		"/p?x=1%26key%3D" + secret + "#frag",
		"/p?token_sign=" + secret,
	} {
		// (Named by number: the store's URI does not take a directory
		// named with a '%'.)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Log(target)
			index, read, disk := recordSecrets(t, target, nil)
			path, _, _ := strings.Cut(target, "?")
			checkNoSecret(t, index, read, disk, path, "upstream.example")
		})
	}
	for name, v := range map[string]string{
		"Api-Key":              secret, // Azure OpenAI's
		"X-Auth-Token":         secret,
		"Anthropic-Auth-Token": secret,
		"Cookie":               "a=" + secret,
		"X-Custom":             "token=" + secret,
		"Referer":              "https://h/p?key=" + secret + "&x=%zz",
		"Origin":               "https://h/p?data[api_key]=" + secret + "&x=%zz",
	} {
		t.Run(name, func(t *testing.T) {
			index, read, disk := recordSecrets(t, "/v1/chat/completions", http.Header{name: {v}, "X-Kept": {"kept"}})
			checkNoSecret(t, index, read, disk, "/v1/chat/completions", "kept")
		})
	}
}

// TestRedactFailedCall: a call upstream that fails quotes its URL, with
// the client's query; neither the client's error nor the archive keeps
// the credential in it.
func TestRedactFailedCall(t *testing.T) {
	dir := t.TempDir()
	a := openArchive(t, dir, openStore(t, dir), archive.Config{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String() // nothing listens there
	l.Close()
	base := serve(t, a, llm.FormatGemini, down)
	req := request(llm.FormatGemini, base, "hi", false)
	req.URL.RawQuery = "api_key=" + secret + "&x=%zz"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 500 || !bytes.Contains(got, []byte("api_key=[redacted]")) {
		t.Fatalf("status %d: %s, want the failed call's error with its URL redacted", resp.StatusCode, got)
	}
	if bytes.Contains(got, []byte(secret)) {
		t.Errorf("the client's error keeps the secret: %s", got)
	}
	x := only(t, a)
	if !strings.Contains(x.Error, "api_key=[redacted]") || x.Response == nil || !bytes.Equal(x.Response.Body, got) {
		t.Errorf("archived error %q, response %+v; want the call's error, the client's answer", x.Error, x.Response)
	}
	index, _ := json.Marshal(x.LLMExchange)
	read, _ := json.Marshal(x)
	checkNoSecret(t, index, read, files(t, dir), "/v1beta/models/m:generateContent?api_key=[redacted]", "x=%zz")
}

// TestRedactGeminiPath: a Gemini client's path names the model and the
// method, so a key written into it (after a ';', or escaped) reaches the
// index's model and the proxy's error, which the archive keeps as the
// client's answer; neither keeps the secret.
func TestRedactGeminiPath(t *testing.T) {
	for i, tt := range []struct{ path, keep string }{
		{"/v1beta/models/m;key=" + secret + ":generateContent", "/v1beta/models/m;key=[redacted]"},
		{"/v1beta/models/m:generateContent;key=" + secret, "/v1beta/models/m:generateContent;key=[redacted]"},
		{"/v1beta/models/m%3Bapi_key=" + secret + "&x=1:streamGenerateContent", "/v1beta/models/m%3Bapi_key=[redacted]"},
		{"/v1beta/models/m%3Fkey%3D" + secret + ":generateContent", ""}, // it decodes to pairs: the path goes whole
	} {
		path := tt.path
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			dir := t.TempDir()
			a := openArchive(t, dir, openStore(t, dir), archive.Config{})
			base := serve(t, a, llm.FormatGemini, "http://127.0.0.1:1")
			req := request(llm.FormatGemini, base, "hi", false)
			if req.URL, _ = url.Parse(base + path); req.URL == nil {
				t.Fatalf("bad path %q", path)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("status %d: %s, want 404", resp.StatusCode, got)
			}
			x := only(t, a)
			index, _ := json.Marshal(x.LLMExchange)
			read, _ := json.Marshal(x)
			checkNoSecret(t, index, read, files(t, dir), tt.keep)
		})
	}
}
