package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeHost stands for the host's interfaces: its addresses are what list
// returns, and reads counts the reads.
type fakeHost struct {
	list  atomic.Pointer[[]netip.Addr]
	err   atomic.Pointer[error]
	reads atomic.Int64
}

func newFakeHost(addrs ...string) *fakeHost {
	f := &fakeHost{}
	f.set(addrs...)
	return f
}

func (f *fakeHost) set(addrs ...string) {
	var l []netip.Addr
	for _, a := range addrs {
		l = append(l, netip.MustParseAddr(a))
	}
	f.list.Store(&l)
}

func (f *fakeHost) read() ([]netip.Addr, error) {
	f.reads.Add(1)
	if e := f.err.Load(); e != nil {
		return nil, *e
	}
	return *f.list.Load(), nil
}

// guardOn returns a guard whose host addresses are f's.
func guardOn(t *testing.T, f *fakeHost, cfg Config) *Guard {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.host = &hostAddrs{read: f.read, maxAge: time.Hour}
	return g
}

func TestCheckAddr(t *testing.T) {
	host := newFakeHost("192.0.2.10", "2001:db8::10", "127.0.0.1")
	tests := []struct {
		addr   string
		cfg    Config
		denied string // part of the reason; "" allowed
	}{
		{"93.184.216.34", Config{}, ""},
		{"2606:2800:220:1:248:1893:25c8:1946", Config{}, ""},
		{"127.0.0.1", Config{AllowPrivate: true}, "loopback"},
		{"127.1.2.3", Config{AllowPrivate: true}, "loopback"},
		{"::1", Config{AllowPrivate: true}, "loopback"},
		{"::ffff:127.0.0.1", Config{AllowPrivate: true}, "loopback"},
		{"169.254.169.254", Config{AllowPrivate: true}, "link-local"},
		{"fe80::1", Config{AllowPrivate: true}, "link-local"},
		{"0.0.0.0", Config{AllowPrivate: true}, "unspecified"},
		{"::", Config{AllowPrivate: true}, "unspecified"},
		{"224.0.0.1", Config{AllowPrivate: true}, "link-local"},
		{"239.1.2.3", Config{AllowPrivate: true}, "multicast"},
		{"ff05::2", Config{AllowPrivate: true}, "multicast"},
		{"255.255.255.255", Config{AllowPrivate: true}, "reserved"},
		{"0.1.2.3", Config{AllowPrivate: true}, "reserved"},
		{"fd00:ec2::254", Config{AllowPrivate: true}, "reserved"},
		{"10.1.2.3", Config{}, "private"},
		{"10.1.2.3", Config{AllowPrivate: true}, ""},
		{"192.168.1.1", Config{}, "private"},
		{"172.16.0.1", Config{}, "private"},
		{"100.64.0.1", Config{}, "private"},
		{"fd12:3456::1", Config{}, "private"},
		{"fd12:3456::1", Config{AllowPrivate: true}, ""},
		// The host's own addresses, though on the internet.
		{"192.0.2.10", Config{}, "an address of this host"},
		{"::ffff:192.0.2.10", Config{}, "an address of this host"},
		{"2001:db8::10", Config{AllowPrivate: true}, "an address of this host"},
		{"192.0.2.11", Config{}, ""},
		// The operator's allow-list wins.
		{"127.0.0.1", Config{Allow: []string{"127.0.0.1"}}, ""},
		{"10.9.8.7", Config{Allow: []string{"10.0.0.0/8"}}, ""},
		{"169.254.169.254", Config{Allow: []string{"10.0.0.0/8"}}, "link-local"},
		{"192.0.2.10", Config{Allow: []string{"192.0.2.0/24"}}, ""},
		{"::1", Config{Allow: []string{"[::1]"}}, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %+v", tt.addr, tt.cfg), func(t *testing.T) {
			err := guardOn(t, host, tt.cfg).CheckAddr(netip.MustParseAddr(tt.addr))
			switch {
			case tt.denied == "" && err != nil:
				t.Errorf("CheckAddr = %v, want allowed", err)
			case tt.denied != "" && (!errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), tt.denied)):
				t.Errorf("CheckAddr = %v, want a denial naming %q", err, tt.denied)
			}
		})
	}
}

func TestNewAllowList(t *testing.T) {
	for _, bad := range []string{"http://mirror", "mirror:8080", "10.0.0.0/33", "*.example.com", "a b"} {
		if _, err := New(Config{Allow: []string{bad}}); err == nil {
			t.Errorf("New(Allow %q) accepted it", bad)
		}
	}
	g, err := New(Config{Allow: []string{" Mirror.Internal. ", "", "10.1.0.0/16", "fd00::1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !g.allowedName("mirror.internal") || g.allowedName("other.internal") {
		t.Errorf("names = %v", g.names)
	}
}

// The host's addresses are read once, and again once they are old; a
// failed first read refuses rather than lets through.
func TestHostAddressesCache(t *testing.T) {
	host := newFakeHost("192.0.2.10")
	g := guardOn(t, host, Config{})
	a, b := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("198.51.100.7")
	for range 3 {
		if err := g.CheckAddr(a); err == nil {
			t.Fatal("host address allowed")
		}
		if err := g.CheckAddr(b); err != nil {
			t.Fatal(err)
		}
	}
	if n := host.reads.Load(); n != 1 {
		t.Errorf("%d reads for 6 checks within maxAge, want 1", n)
	}
	// The host gains b: refused once the cache is stale.
	host.set("192.0.2.10", "198.51.100.7")
	g.host.cur.Load().at = time.Now().Add(-2 * time.Hour)
	if err := g.CheckAddr(b); err == nil || !strings.Contains(err.Error(), "of this host") {
		t.Errorf("new host address: %v, want refused", err)
	}
	if n := host.reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2", n)
	}

	failing := newFakeHost()
	e := errors.New("netlink says no")
	failing.err.Store(&e)
	if err := guardOn(t, failing, Config{}).CheckAddr(b); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "netlink says no") {
		t.Errorf("unreadable host addresses: %v, want a denial", err)
	}
}

func TestRealHostAddresses(t *testing.T) {
	addrs, err := interfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range addrs {
		found = found || a == netip.MustParseAddr("127.0.0.1")
	}
	if !found {
		t.Errorf("interface addresses %v lack 127.0.0.1", addrs)
	}
}

func TestCheckURL(t *testing.T) {
	g := guardOn(t, newFakeHost("192.0.2.10"), Config{Allow: []string{"localhost", "10.0.0.5"}})
	strict := guardOn(t, newFakeHost("192.0.2.10"), Config{})
	tests := []struct {
		g      *Guard
		url    string
		denied bool
		bad    bool
	}{
		{strict, "https://example.com/x", false, false},
		{strict, "http://93.184.216.34:8080/x", false, false},
		{strict, "ftp://example.com/x", false, true},
		{strict, "file:///etc/shadow", false, true},
		{strict, "/etc/shadow", false, true},
		{strict, "http:///nohost", false, true},
		{strict, "http://127.0.0.1:8080/api/v1/sandboxes", true, false},
		{strict, "http://[::1]/", true, false},
		{strict, "http://[::ffff:127.0.0.1]/", true, false},
		{strict, "http://169.254.169.254/latest/meta-data/", true, false},
		{strict, "http://10.0.0.5/", true, false},
		{strict, "http://0.0.0.0:8080/", true, false},
		{strict, "http://192.0.2.10:8080/", true, false},
		{strict, "http://localhost:8080/", true, false},
		{strict, "http://LOCALHOST./", true, false},
		{strict, "http://api.localhost/", true, false},
		{strict, "http://user:pw@127.0.0.1/", true, false},
		{g, "http://localhost:8080/", false, false},
		{g, "http://10.0.0.5/", false, false},
		{g, "http://10.0.0.6/", true, false},
	}
	for _, tt := range tests {
		err := tt.g.CheckURL(tt.url)
		switch {
		case tt.denied && !errors.Is(err, ErrDenied):
			t.Errorf("CheckURL(%q) = %v, want a denial", tt.url, err)
		case tt.bad && (err == nil || errors.Is(err, ErrDenied)):
			t.Errorf("CheckURL(%q) = %v, want not an http(s) URL", tt.url, err)
		case !tt.denied && !tt.bad && err != nil:
			t.Errorf("CheckURL(%q) = %v, want nil", tt.url, err)
		}
	}
}

// The check is made on the address dialed, after name resolution: a name
// that leads to loopback is refused like 127.0.0.1.
func TestDialChecksResolvedAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	dial := guardOn(t, newFakeHost(), Config{}).DialContext(5 * time.Second)
	for _, addr := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		c, err := dial(context.Background(), "tcp", addr)
		if !errors.Is(err, ErrDenied) {
			if c != nil {
				c.Close()
			}
			t.Errorf("dial %s: %v, want denied", addr, err)
		}
	}
	allowed := guardOn(t, newFakeHost(), Config{Allow: []string{"localhost"}}).DialContext(5 * time.Second)
	c, err := allowed(context.Background(), "tcp", "localhost:"+port)
	if err != nil {
		t.Fatalf("dial allow-listed localhost: %v", err)
	}
	c.Close()
}

// A template file source on the daemon's host is refused by default and
// fetched when the operator allow-lists it; redirects are checked too.
func TestFetcher(t *testing.T) {
	var hits atomic.Int64
	body := strings.Repeat("x", 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/file":
			io.WriteString(w, body)
		case "/chunked":
			w.(http.Flusher).Flush() // no Content-Length
			io.WriteString(w, body)
		case "/missing":
			http.NotFound(w, r)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/to-ip":
			http.Redirect(w, r, "http://"+r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()+"/file", http.StatusFound)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	byIP := srv.URL
	byName := "http://localhost:" + port

	fetch := func(cfg Config, fc FetchConfig, url string) (string, error) {
		g := guardOn(t, newFakeHost(), cfg)
		fc.Guard = g
		rc, err := NewFetcher(fc).Open(context.Background(), url)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}

	// Refused by default, before any request is made.
	for _, u := range []string{byIP + "/file", byName + "/file"} {
		if _, err := fetch(Config{}, FetchConfig{}, u); !errors.Is(err, ErrDenied) {
			t.Errorf("fetch %s: %v, want denied", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the refused fetches reached the server %d times", n)
	}

	allowIP := Config{Allow: []string{"127.0.0.1"}}
	tests := []struct {
		name    string
		cfg     Config
		fc      FetchConfig
		url     string
		want    string
		wantErr string
		denied  bool
	}{
		{name: "allowed by address", cfg: allowIP, url: byIP + "/file", want: body},
		{name: "allowed by prefix", cfg: Config{Allow: []string{"127.0.0.0/8"}}, url: byIP + "/file", want: body},
		{name: "allowed by name", cfg: Config{Allow: []string{"localhost"}}, url: byName + "/file", want: body},
		{name: "redirect from an allowed name to a refused address", cfg: Config{Allow: []string{"localhost"}}, url: byName + "/to-ip", denied: true},
		{name: "exactly the limit", cfg: allowIP, fc: FetchConfig{MaxBytes: 100}, url: byIP + "/file", want: body},
		{name: "too large, announced", cfg: allowIP, fc: FetchConfig{MaxBytes: 99}, url: byIP + "/file", wantErr: "too large"},
		{name: "too large, streamed", cfg: allowIP, fc: FetchConfig{MaxBytes: 99}, url: byIP + "/chunked", wantErr: "too large"},
		{name: "not found", cfg: allowIP, url: byIP + "/missing", wantErr: "404"},
		{name: "redirect loop", cfg: allowIP, fc: FetchConfig{MaxRedirects: 3}, url: byIP + "/loop", wantErr: "more than 3 redirects"},
		{name: "not http", cfg: allowIP, url: "ftp://127.0.0.1/x", wantErr: "not an http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fetch(tt.cfg, tt.fc, tt.url)
			switch {
			case tt.denied:
				if !errors.Is(err, ErrDenied) {
					t.Errorf("err = %v, want denied", err)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// FuzzCheckURL: a source URL that passes has no internal address for a
// host, and a refusal is only ever for an address or a loopback name.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080/x", "https://example.com/", "http://[::ffff:10.0.0.1]/", "http://LOCALHOST./",
		"http://[fe80::1%25eth0]/", "http://0x7f.0.0.1/", "ftp://x/", "http://user@169.254.169.254/", "http://%31%32%37.0.0.1/"} {
		f.Add(s)
	}
	g := Must(New(Config{}))
	g.host = &hostAddrs{read: newFakeHost("192.0.2.10").read, maxAge: time.Hour}
	f.Fuzz(func(t *testing.T, raw string) {
		err := g.CheckURL(raw)
		u, perr := url.Parse(raw)
		if perr != nil {
			if err == nil {
				t.Fatalf("CheckURL(%q) passed an unparsable URL", raw)
			}
			return
		}
		host := u.Hostname()
		a, isAddr := parseAddr(host)
		switch {
		case err == nil && isAddr && g.CheckAddr(a) != nil:
			t.Fatalf("CheckURL(%q) passed the internal address %s", raw, a)
		case errors.Is(err, ErrDenied) && !isAddr && normalizeName(host) != "localhost" && !strings.HasSuffix(normalizeName(host), ".localhost"):
			t.Fatalf("CheckURL(%q) denied the name %q: %v", raw, host, err)
		}
	})
}
