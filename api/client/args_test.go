package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// TestEmptyArguments checks that every call given an empty id, name or
// reference refuses it before sending anything, with an error that
// matches ErrInvalidArgument as the daemon's refusal would: a Go caller
// tells bad input apart with errors.Is whichever side found it.
func TestEmptyArguments(t *testing.T) {
	tests := []struct {
		name string
		call func(ctx context.Context, c *client.Client) error
	}{
		{"sandbox get", func(ctx context.Context, c *client.Client) error { _, err := c.Sandbox.Get(ctx, ""); return err }},
		{"sandbox delete", func(ctx context.Context, c *client.Client) error { return c.Sandbox.Delete(ctx, "") }},
		{"sandbox stop", func(ctx context.Context, c *client.Client) error { return c.Sandbox.Stop(ctx, "") }},
		{"sandbox pause", func(ctx context.Context, c *client.Client) error { _, err := c.Sandbox.Pause(ctx, ""); return err }},
		{"sandbox exec", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.Execute(ctx, "", api.ExecRequest{Command: []string{"true"}})
			return err
		}},
		{"sandbox exec stream", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.ExecuteStream(ctx, "", api.ExecRequest{Command: []string{"true"}}, nil, nil)
			return err
		}},
		{"sandbox logs", func(ctx context.Context, c *client.Client) error { _, err := c.Sandbox.GetLogs(ctx, ""); return err }},
		{"upload without a sandbox", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.UploadFile(ctx, "", "/f", strings.NewReader("x"), 0)
			return err
		}},
		{"upload without a path", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.UploadFile(ctx, "sb1", "", strings.NewReader("x"), 0)
			return err
		}},
		{"download", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.DownloadFile(ctx, "", "/f")
			return err
		}},
		{"stat", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.StatFile(ctx, "", "/f")
			return err
		}},
		{"wait for ready", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.WaitForReady(ctx, "", 0)
			return err
		}},
		{"terminal create", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.CreateTerminal(ctx, "", api.CreateTerminalRequest{})
			return err
		}},
		{"terminal get without a name", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.GetTerminal(ctx, "sb1", "")
			return err
		}},
		{"terminal delete without a name", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.DeleteTerminal(ctx, "sb1", "")
			return err
		}},
		{"terminal attach without a name", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sandbox.AttachTerminal(ctx, "sb1", "", client.AttachOptions{})
			return err
		}},
		{"context get", func(ctx context.Context, c *client.Client) error { _, err := c.Contexts().Get(ctx, ""); return err }},
		{"context create in", func(ctx context.Context, c *client.Client) error {
			_, err := c.Contexts().CreateIn(ctx, "", api.CreateContextRequest{})
			return err
		}},
		{"context execute stream", func(ctx context.Context, c *client.Client) error {
			_, err := c.Contexts().ExecuteStream(ctx, "", api.ExecuteRequest{Code: "1"}, client.StreamHandler{})
			return err
		}},
		{"session get", func(ctx context.Context, c *client.Client) error { _, err := c.Sessions().Get(ctx, ""); return err }},
		{"session keepalive", func(ctx context.Context, c *client.Client) error {
			_, err := c.Sessions().KeepAlive(ctx, "", api.KeepAliveRequest{})
			return err
		}},
		{"snapshot create", func(ctx context.Context, c *client.Client) error {
			_, err := c.Snapshots().Create(ctx, "", false)
			return err
		}},
		{"snapshot get", func(ctx context.Context, c *client.Client) error { _, err := c.Snapshots().Get(ctx, ""); return err }},
		{"snapshot restore", func(ctx context.Context, c *client.Client) error {
			_, err := c.Snapshots().Restore(ctx, "", nil, nil)
			return err
		}},
		{"snapshot fork", func(ctx context.Context, c *client.Client) error {
			_, err := c.Snapshots().Fork(ctx, "", api.ForkRequest{})
			return err
		}},
		{"run get", func(ctx context.Context, c *client.Client) error { _, err := c.Runs().Get(ctx, ""); return err }},
		{"run events", func(ctx context.Context, c *client.Client) error {
			return c.Runs().Events(ctx, "", func(api.RunEvent) error { return nil })
		}},
		{"run events after", func(ctx context.Context, c *client.Client) error {
			return c.Runs().EventsAfter(ctx, "", 3, func(api.RunEvent) error { return nil })
		}},
		{"run events after a negative seq", func(ctx context.Context, c *client.Client) error {
			return c.Runs().EventsAfter(ctx, "run-1", -1, func(api.RunEvent) error { return nil })
		}},
		{"run logs", func(ctx context.Context, c *client.Client) error { _, err := c.Runs().Logs(ctx, ""); return err }},
		{"llm exchange", func(ctx context.Context, c *client.Client) error { _, err := c.LLM().Get(ctx, ""); return err }},
		{"llm conversations", func(ctx context.Context, c *client.Client) error {
			_, err := c.LLM().Conversations(ctx, "")
			return err
		}},
		{"llm key revoke", func(ctx context.Context, c *client.Client) error { return c.LLMKeys().Revoke(ctx, "") }},
		{"prepull get", func(ctx context.Context, c *client.Client) error { _, err := c.Prepull.Get(ctx, ""); return err }},
		{"prepull for template", func(ctx context.Context, c *client.Client) error {
			_, err := c.Prepull.CreateForTemplate(ctx, "")
			return err
		}},
		{"prepull negative timeout", func(ctx context.Context, c *client.Client) error {
			_, err := c.Prepull.Create(ctx, "alpine", -1)
			return err
		}},
		{"template get", func(ctx context.Context, c *client.Client) error { _, err := c.Template.Get(ctx, ""); return err }},
		{"template export", func(ctx context.Context, c *client.Client) error {
			_, err := c.Template.ExportYAML(ctx, "", 0)
			return err
		}},
		{"image follow", func(ctx context.Context, c *client.Client) error { _, err := c.Image.Follow(ctx, "", nil); return err }},
		{"image remove", func(ctx context.Context, c *client.Client) error { return c.Image.Remove(ctx, "") }},
		{"import without YAML", func(ctx context.Context, c *client.Client) error {
			_, err := c.ImportExport.ImportTemplates(ctx, nil, "", false)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := fakeDaemon(t, reply{status: http.StatusTeapot})
			err := tt.call(context.Background(), c)
			if !errors.Is(err, client.ErrInvalidArgument) {
				t.Errorf("error %v, want one matching ErrInvalidArgument", err)
			}
			if rec.Method != "" {
				t.Errorf("sent %s %s", rec.Method, rec.Path)
			}
		})
	}
}
