package service

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
)

// GatewayPrefix starts every path of the port gateway (package gateway),
// which serves /api/v1/sandbox/{id}/port/{port}/...
const GatewayPrefix = "/api/v1/sandbox/"

// AccessURL is the accessUrl of sandbox id for a daemon reached at base
// (e.g. "http://host:8080"): append "/port/<port>/<path>" to reach a port.
func AccessURL(base, id string) string {
	return strings.TrimSuffix(base, "/") + GatewayPrefix + id
}

// validID matches every id a sandbox can have: others are not looked up.
var validID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Authorize checks that token grants access to the ports of sandbox id,
// as the port gateway requires, in LiteBoxd's order: a missing token is
// ErrUnauthenticated, an unknown sandbox ErrNotFound (SANDBOX_NOT_FOUND),
// a wrong token ErrUnauthenticated, and a sandbox that is not running
// ErrFailedPrecondition (SANDBOX_NOT_READY). A sandbox without a token
// grants access to no one.
func (s *Sandboxes) Authorize(ctx context.Context, id, token string) error {
	if token == "" {
		return unauthenticated("missing access token")
	}
	if !validID.MatchString(id) {
		return sandboxNotFound()
	}
	want, running, err := s.m.Lookup(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return sandboxNotFound()
	}
	if err != nil {
		return fmt.Errorf("look up sandbox %s: %w", id, err)
	}
	return grant(id, token, want, running)
}

// CheckAccess is Authorize's check for sandbox sb, which the caller has
// just read (Get): a request that reads the sandbox for more than its
// token (the E2B API's public ports) reads it once. Its answers are
// Authorize's for a sandbox that exists.
func CheckAccess(sb *api.Sandbox, token string) error {
	if token == "" {
		return unauthenticated("missing access token")
	}
	return grant(sb.ID, token, sb.AccessToken, sb.Status == api.StatusRunning)
}

// grant checks token against want, sandbox id's, and that it runs.
func grant(id, token, want string, running bool) error {
	if !tokenEqual(token, want) {
		return unauthenticated("invalid access token")
	}
	if !running {
		return errdefs.WithCode(errdefs.Precondition("sandbox %s is not running", id), api.CodeSandboxNotReady)
	}
	return nil
}

// Dial connects to 127.0.0.1:port inside sandbox id, for the port gateway
// (which checks access with Authorize first). A sandbox gone meanwhile is
// ErrNotFound (SANDBOX_NOT_FOUND), one not running ErrFailedPrecondition
// (SANDBOX_NOT_READY), a port nothing listens on ErrUnavailable.
func (s *Sandboxes) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	conn, err := s.m.Dial(ctx, id, port)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, sandboxNotFound()
	}
	return conn, err
}

// sandboxNotFound is the gateway's answer for a sandbox it cannot reach,
// in LiteBoxd's words: it names no sandbox, known or not.
func sandboxNotFound() error {
	return errdefs.WithCode(errdefs.NotFound("sandbox not found"), api.CodeSandboxNotFound)
}

func unauthenticated(msg string) error {
	return fmt.Errorf("%s: %w", msg, errdefs.ErrUnauthenticated)
}

// tokenEqual compares in constant time. Hashing first makes the time
// independent of the lengths too; an empty stored token matches nothing.
func tokenEqual(got, want string) bool {
	if want == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
