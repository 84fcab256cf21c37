package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// A tenant is whoever an API key stands for: what one creates by a name of
// its choosing (a session id, a context) is its own, out of reach of other
// keys. Requests without keys all have the tenant "".

type tenantKey struct{}

// Tenant returns the tenant of an API key: a digest that never contains
// '/' and says nothing of the key.
func Tenant(apiKey string) string {
	sum := sha256.Sum256([]byte("agent2env tenant\x00" + apiKey))
	return hex.EncodeToString(sum[:12])
}

// WithTenant returns ctx carrying the tenant of its request.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantOf returns the tenant ctx carries ("" when none).
func TenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// Bearer returns the key of an Authorization header's Bearer credential
// (the scheme in any case, as Check reads it).
func Bearer(authorization string) (string, bool) {
	scheme, token, ok := strings.Cut(authorization, " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}
