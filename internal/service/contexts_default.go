package service

import (
	"context"

	"github.com/agent2env/agent2env/api"
)

// Default returns the context named req.Name of req.Language in sandbox
// sandboxID, making it of req on first use (one that exists is returned
// as it is): the context a run that names none uses on the surfaces that
// have one per sandbox and language (execd's and E2B's default
// contexts). Calls for one sandbox, language and name are serialized
// (among daemons too, NewContexts), so concurrent first runs make one
// context. An unknown language is ErrInvalidArgument (INVALID_LANGUAGE).
func (c *Contexts) Default(ctx context.Context, sandboxID string, req api.CreateContextRequest) (*api.Context, error) {
	lang, err := Language(req.Language)
	if err != nil {
		return nil, err
	}
	unlock, err := c.defaults.LockContext(ctx, sandboxID+"\x00"+lang+"\x00"+req.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	list, err := c.List(ctx, sandboxID, "")
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if it := &list.Items[i]; it.Name == req.Name && it.Language == lang {
			return it, nil
		}
	}
	req.Language = lang
	return c.Create(ctx, sandboxID, req)
}
