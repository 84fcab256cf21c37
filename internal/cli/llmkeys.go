package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func newLLMKeysCmd(e env, cc *clientConfig) *cobra.Command {
	return group("keys <command>", "make, list and revoke per-run keys of the LLM proxy, for callers outside sandboxes",
		`  KEY=$(agent2env llm keys create --run run-7 --budget-tokens 200000 --expires-in 2h)
  OPENAI_BASE_URL=http://localhost:8080/llm/v1 OPENAI_API_KEY="$KEY" my-agent
  agent2env llm keys ls
  agent2env llm keys revoke llmk_0123abcd`,
		newLLMKeyCreateCmd(e, cc), newLLMKeyListCmd(e, cc), newLLMKeyRevokeCmd(e, cc),
	)
}

func newLLMKeyCreateCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		req       api.LLMKeyRequest
		expiresIn time.Duration
		out       output
	)
	c := &cobra.Command{
		Use:   "create [flags]",
		Short: "make a per-run key and print its secret, shown this once",
		Long: `create makes a per-run key of the LLM proxy and prints its secret, which the daemon does not
keep and never shows again: give it to the caller as its OPENAI_API_KEY, ANTHROPIC_API_KEY or
GEMINI_API_KEY with the base URL <daemon>/llm. Calls with it are attributed to --sandbox and
--run, counted against the key's budget and limits (zero: the daemon's defaults for keys) and
refused after --expires-in or once it is revoked. -o json prints the key's record with the
secret.`,
		Example: `  agent2env llm keys create --run run-7 --budget-tokens 200000
  agent2env llm keys create --name ci --expires-in 30m --requests-per-minute 60 -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// The API takes whole seconds: refuse what it would round.
			if expiresIn < 0 || expiresIn%time.Second != 0 {
				return usageErrorf(c, "--expires-in %s: want a positive number of whole seconds (90m, 2h)", expiresIn)
			}
			req.ExpiresIn = int(expiresIn / time.Second)
			return show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
				k, err := cl.LLMKeys().Create(ctx, req)
				if err != nil {
					return view{}, err
				}
				// The secret alone by default, so that KEY=$(…) takes it;
				// -q prints the key's id, which revoke takes.
				return view{value: k, ids: []string{k.ID}, text: idText(k.Key)}, nil
			})(c, nil)
		},
	}
	f := c.Flags()
	f.StringVar(&req.Name, "name", "", "a `NAME` to know the key by")
	f.StringVar(&req.Sandbox, "sandbox", "", "attribute the key's calls to sandbox `ID`")
	f.StringVar(&req.Run, "run", "", "attribute the key's calls to run `ID` (and count them against its budget): one your API key submitted")
	f.Int64Var(&req.BudgetTokens, "budget-tokens", 0, "tokens (input + output) the key may use in all; past them calls get 429")
	f.IntVar(&req.RequestsPerMinute, "requests-per-minute", 0, "calls a minute the key may make")
	f.IntVar(&req.TokensPerMinute, "tokens-per-minute", 0, "tokens a minute the key may use")
	f.DurationVar(&expiresIn, "expires-in", 0, "the key's lifetime (default: the daemon's, 1h; at most 720h)")
	c.RegisterFlagCompletionFunc("sandbox", cc.complete(e, sandboxIDs, true))
	out.register(c, "the key's secret", valueFormats)
	return c
}

// llmKeyState is what a key is now: active, expired or revoked.
func llmKeyState(k api.LLMKey, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case !now.Before(k.ExpiresAt):
		return "expired"
	}
	return "active"
}

func orZero64(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func newLLMKeyListCmd(e env, cc *clientConfig) *cobra.Command {
	var (
		out  output
		page pageFlags
	)
	c := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "list the per-run keys, newest first (or oldest first; never their secrets)",
		Example: `  agent2env llm keys ls
  agent2env llm keys ls -o wide --limit 20
  agent2env llm keys ls -o json | jq '.items[] | select(.used_tokens > 100000)'`,
		Args: noArgs,
		RunE: show(e, cc, &out, func(ctx context.Context, cl *client.Client, _ []string) (view, error) {
			l, err := cl.LLMKeys().ListPage(ctx, client.ListLLMKeysOptions{Limit: int(page.limit), Cursor: page.cursor, Order: page.order()})
			if err != nil {
				return view{}, err
			}
			ks := l.Items
			now := time.Now()
			t := newTable("ID", "NAME", "SANDBOX", "RUN", "USED", "BUDGET", "STATE", "EXPIRES", "AGE").
				withWide("REQUESTS/MIN", "TOKENS/MIN", "REVOKED")
			ids := make([]string, len(ks))
			for i, k := range ks {
				ids[i] = k.ID
				revoked := "-"
				if k.RevokedAt != nil {
					revoked = k.RevokedAt.Local().Format(time.DateTime)
				}
				t.add(k.ID, orDash(k.Name), orDash(k.Sandbox), orDash(k.Run), fmt.Sprint(k.UsedTokens), orZero64(k.BudgetTokens),
					llmKeyState(k, now), k.ExpiresAt.Local().Format(time.DateTime), age(k.CreatedAt),
					orZero(k.RequestsPerMinute), orZero(k.TokensPerMinute), revoked)
			}
			return view{value: l, ids: ids, table: t}, nil
		}),
	}
	page.register(c, "keys", "next_cursor", true)
	out.register(c, "table", tableFormats)
	return c
}

func newLLMKeyRevokeCmd(e env, cc *clientConfig) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID... [flags]",
		Short: "revoke per-run keys: calls with them are refused from now on",
		Long: "revoke revokes per-run keys, printing each one revoked; calls with them are refused from now on. " +
			"A failure does not stop the others; any makes the exit code 1.",
		Example:           `  agent2env llm keys revoke llmk_0123abcd`,
		Args:              minArgs(1, "need at least one key id"),
		ValidArgsFunction: cc.complete(e, llmKeyIDs, true),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := cc.client(e)
			if err != nil {
				return err
			}
			return forEach(e, args, func(id string) error { return cl.LLMKeys().Revoke(c.Context(), id) })
		},
	}
}

// llmKeyIDs lists the ids of the keys not revoked, for completion.
func llmKeyIDs(ctx context.Context, cl *client.Client) ([]string, error) {
	ks, err := cl.LLMKeys().List(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, k := range ks {
		if k.RevokedAt == nil {
			ids = append(ids, k.ID)
		}
	}
	return ids, nil
}
