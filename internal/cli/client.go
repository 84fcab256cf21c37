package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agent2env/agent2env/api/client"
)

// This file holds what the client commands (sandbox, image) share: the
// connection flags, argument parsing, subcommand dispatch and output.

// exitError makes Main exit with code and print nothing more: the command
// has already said what happened (usage help, or the output of a remote
// command whose exit code this is).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// subcommand is one verb of a command group, such as "sandbox create".
type subcommand struct {
	synopsis string // after "agent2env GROUP "
	summary  string
	run      func(ctx context.Context, name string, args []string) error
}

// runGroup runs the subcommand of group named by args[0].
func runGroup(ctx context.Context, e env, group string, args []string, subs map[string]subcommand) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		groupUsage(e.stderr, group, subs)
		return flag.ErrHelp
	}
	sub, ok := subs[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "agent2env %s: unknown command %q\n\n", group, args[0])
		groupUsage(e.stderr, group, subs)
		return &exitError{code: 2}
	}
	return sub.run(ctx, group+" "+args[0], args[1:])
}

func groupUsage(w io.Writer, group string, subs map[string]subcommand) {
	fmt.Fprintf(w, "usage: agent2env %s <command> [flags]\n\ncommands:\n", group)
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, n := range names {
		fmt.Fprintf(tw, "  %s %s\t%s\n", group, subs[n].synopsis, subs[n].summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun 'agent2env %s <command> -h' for a command's flags.\n", group)
}

// conn holds the flags that say how to reach the daemon.
type conn struct {
	url, token string
}

// clientFlags returns the flag set of the client subcommand name with the
// connection flags registered.
func clientFlags(e env, name, synopsis string, cn *conn) *flag.FlagSet {
	fs := newFlags(e, name, name+" "+synopsis)
	def := os.Getenv(client.EnvURL)
	if def == "" {
		def = client.DefaultURL
	}
	fs.StringVar(&cn.url, "url", def, "daemon URL (env "+client.EnvURL+")")
	// The token's default is read later so that -h does not print it.
	fs.StringVar(&cn.token, "token", "", "API bearer token (default: env "+client.EnvToken+")")
	return fs
}

func (cn *conn) client() (*client.Client, error) {
	token := cn.token
	if token == "" {
		token = os.Getenv(client.EnvToken)
	}
	return client.New(cn.url, client.WithToken(token), client.WithUserAgent("agent2env-cli"))
}

// parseArgs parses args and returns the positional arguments. Flags may
// also follow the first n positional arguments (any number when n < 0),
// which Go's flag package alone does not allow; everything after the nth
// positional argument and the flags that follow it, or after "--", is
// positional as it stands.
func parseArgs(fs *flag.FlagSet, args []string, n int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, err
			}
			// The flag package has printed the error and the usage.
			return nil, &exitError{code: 2}
		}
		rest := fs.Args()
		ended := len(rest) < len(args) && args[len(args)-len(rest)-1] == "--"
		if ended || len(rest) == 0 || len(pos) == n {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// positional parses args and checks that exactly n positional arguments
// remain. With none wanted, an extra one is "unexpected argument";
// otherwise a wrong count is a usage error saying need.
func positional(e env, fs *flag.FlagSet, args []string, n int, need string) ([]string, error) {
	pos, err := parseArgs(fs, args, -1)
	if err != nil {
		return nil, err
	}
	if n == 0 && len(pos) > 0 {
		return nil, usageError(e, fs, "unexpected argument %q", pos[0])
	}
	if len(pos) != n {
		return nil, usageError(e, fs, "%s", need)
	}
	return pos, nil
}

// usageError reports a wrong use of the command whose flags are fs.
func usageError(e env, fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(e.stderr, "agent2env %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return &exitError{code: 2}
}

// envFlag collects repeated KEY=VALUE flags.
type envFlag map[string]string

func (f envFlag) String() string {
	kvs := make([]string, 0, len(f))
	for k, v := range f {
		kvs = append(kvs, k+"="+v)
	}
	sort.Strings(kvs)
	return strings.Join(kvs, ",")
}

func (f envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	f[k] = v
	return nil
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes tab-separated rows as aligned columns; call flush after
// the last row.
func table(w io.Writer, header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	return tw
}

// age formats how long ago t was, coarsely: 42s, 5m, 3h, 12d.
func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case t.IsZero():
		return "-"
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// formatBytes formats n with binary units: 512 B, 1.5 KiB, 12.3 MiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// removeEach is every "rm" command: it removes each argument with del,
// printing what it removed, and reports every failure rather than stopping
// at the first. what names the argument in usage ("ID"); noun in errors.
func removeEach(ctx context.Context, e env, name, what, noun string, args []string,
	del func(ctx context.Context, cl *client.Client, arg string) error) error {
	var cn conn
	fs := clientFlags(e, name, what+"... [flags]", &cn)
	targets, err := parseArgs(fs, args, -1)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return usageError(e, fs, "need at least one %s", noun)
	}
	cl, err := cn.client()
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range targets {
		if err := del(ctx, cl, t); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintln(e.stdout, t)
	}
	return errors.Join(errs...)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
