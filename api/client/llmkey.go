package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agent2env/agent2env/api"
)

// LLMKeyService holds the per-run LLM key endpoints. Get it with
// Client.LLMKeys.
//
//	k, err := c.LLMKeys().Create(ctx, api.LLMKeyRequest{Name: "ci", BudgetTokens: 100000})
//	// give k.Key to the caller as its OPENAI_API_KEY / ANTHROPIC_API_KEY
//
// A request's Run ties the key to a task run: its calls are attributed to
// the run and counted against its budget. The run must exist (the ID of a
// Run that Client.Runs().Submit or List returned) and, with API keys on,
// be one the client's key submitted; another ID is an error matching
// ErrNotFound, and no key is made.
type LLMKeyService struct {
	c *Client
}

// LLMKeys returns the per-run LLM key endpoints.
func (c *Client) LLMKeys() *LLMKeyService { return &LLMKeyService{c: c} }

// Create makes a key; the answer's Key is its secret, shown only now.
func (s *LLMKeyService) Create(ctx context.Context, req api.LLMKeyRequest) (*api.LLMKey, error) {
	var out api.LLMKey
	if err := s.c.doJSON(ctx, http.MethodPost, "/llm/keys", req, &out); err != nil {
		return nil, wrapf(err, "create llm key")
	}
	return &out, nil
}

// List returns the keys, newest first, without their secrets.
func (s *LLMKeyService) List(ctx context.Context) ([]api.LLMKey, error) {
	l, err := s.ListPage(ctx, ListLLMKeysOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ListLLMKeysOptions asks for a page of LLM keys. The zero value asks for
// every key, newest first.
type ListLLMKeysOptions struct {
	// Limit and Cursor ask for one page (Limit 0: every key); the next
	// page's cursor is the list's NextCursor.
	Limit  int
	Cursor string
	// Order is the list's order: "" (the daemon's default, newest first),
	// api.OrderAsc oldest first or api.OrderDesc newest first.
	Order api.Order
}

// ListPage returns the keys without their secrets, newest first unless
// opts.Order says otherwise: one page when opts.Limit is set.
func (s *LLMKeyService) ListPage(ctx context.Context, opts ListLLMKeysOptions) (*api.LLMKeyList, error) {
	var out api.LLMKeyList
	if err := s.c.doJSONQuery(ctx, http.MethodGet, "/llm/keys", pageQuery(opts.Limit, opts.Cursor, opts.Order), nil, &out); err != nil {
		return nil, wrapf(err, "list llm keys")
	}
	return &out, nil
}

// Revoke revokes a key: calls with it are refused from now on. An unknown
// key is ErrNotFound.
func (s *LLMKeyService) Revoke(ctx context.Context, id string) error {
	if id == "" {
		return invalidf("llm key id is empty")
	}
	if err := s.c.doJSON(ctx, http.MethodDelete, "/llm/keys/"+url.PathEscape(id), nil, nil); err != nil {
		return wrapf(err, "revoke llm key %s", id)
	}
	return nil
}
