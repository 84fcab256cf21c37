package client

import (
	"context"
	"errors"
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
	var out api.LLMKeyList
	if err := s.c.doJSON(ctx, http.MethodGet, "/llm/keys", nil, &out); err != nil {
		return nil, wrapf(err, "list llm keys")
	}
	return out.Items, nil
}

// Revoke revokes a key: calls with it are refused from now on. An unknown
// key is ErrNotFound.
func (s *LLMKeyService) Revoke(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("llm key id is empty")
	}
	if err := s.c.doJSON(ctx, http.MethodDelete, "/llm/keys/"+url.PathEscape(id), nil, nil); err != nil {
		return wrapf(err, "revoke llm key %s", id)
	}
	return nil
}
