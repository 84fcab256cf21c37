package service

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

func TestAuthorize(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	a, b, stopped := e.running(t), e.running(t), e.running(t)
	if _, err := e.sb.Stop(ctx, stopped.ID); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		id, token string
		class     error
		code, msg string
	}{
		{"its token", a.ID, a.AccessToken, nil, "", ""},
		{"missing token", a.ID, "", errdefs.ErrUnauthenticated, "", "missing access token"},
		// A missing token is answered before the sandbox is looked up.
		{"missing token, unknown sandbox", "nosuch", "", errdefs.ErrUnauthenticated, "", "missing access token"},
		{"wrong token", a.ID, "wrong", errdefs.ErrUnauthenticated, "", "invalid access token"},
		{"another sandbox's token", a.ID, b.AccessToken, errdefs.ErrUnauthenticated, "", "invalid access token"},
		{"token prefix", a.ID, a.AccessToken[:10], errdefs.ErrUnauthenticated, "", "invalid access token"},
		{"token and more", a.ID, a.AccessToken + "x", errdefs.ErrUnauthenticated, "", "invalid access token"},
		{"unknown sandbox", "nosuch", a.AccessToken, errdefs.ErrNotFound, api.CodeSandboxNotFound, "sandbox not found"},
		{"id no sandbox can have", "NO SUCH", a.AccessToken, errdefs.ErrNotFound, api.CodeSandboxNotFound, "sandbox not found"},
		{"not running", stopped.ID, stopped.AccessToken, errdefs.ErrFailedPrecondition, api.CodeSandboxNotReady, "not running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.sb.Authorize(ctx, tt.id, tt.token)
			checkErr(t, err, tt.class, tt.code)
			if err != nil && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q, want one with %q", err, tt.msg)
			}
			// CheckAccess answers alike for a sandbox read beforehand.
			sb, gerr := e.sb.Get(ctx, tt.id)
			if gerr != nil {
				return
			}
			err = CheckAccess(sb, tt.token)
			checkErr(t, err, tt.class, tt.code)
			if err != nil && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("CheckAccess: message %q, want one with %q", err, tt.msg)
			}
		})
	}
}

func TestTokenEqual(t *testing.T) {
	tests := []struct {
		got, want string
		equal     bool
	}{
		{"", "", false}, // an empty stored token matches nothing
		{"x", "", false},
		{"tok", "tok", true},
		{"tok", "tak", false},
		{"toka", "tok", false},
	}
	for _, tt := range tests {
		if got := tokenEqual(tt.got, tt.want); got != tt.equal {
			t.Errorf("tokenEqual(%q, %q) = %v, want %v", tt.got, tt.want, got, tt.equal)
		}
	}
}

// Dial reaches a port of the sandbox (the fake runtime's agents share the
// host's loopback), and says why it cannot in the gateway's terms.
func TestDial(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.WriteString(c, "hello")
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port

	sb := e.running(t)
	conn, err := e.sb.Dial(ctx, sb.ID, port)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(conn)
	conn.Close()
	if string(b) != "hello" {
		t.Errorf("read %q through the dialed port, want hello", b)
	}

	_, err = e.sb.Dial(ctx, "nosuch", port)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
	if err.Error() != "sandbox not found" {
		t.Errorf("message %q, want LiteBoxd's %q", err, "sandbox not found")
	}
	if _, err := e.sb.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.sb.Dial(ctx, sb.ID, port)
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeSandboxNotReady)
}

func TestAccessURL(t *testing.T) {
	for _, base := range []string{"http://h:8080", "http://h:8080/"} {
		if got := AccessURL(base, "abc"); got != "http://h:8080/api/v1/sandbox/abc" {
			t.Errorf("AccessURL(%q) = %q", base, got)
		}
	}
}
