package cli

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/api/client"
	"github.com/agent2env/agent2env/internal/yamlerr"
)

// How a client command reaches the daemon. Each setting comes from, in
// order: its flag, the environment (the first variable set of its list),
// the config file "agent2env login" writes, and its default.
var (
	// urlEnv: ours, then the names clients of the sessions API and of
	// code-interpreter contexts already use.
	urlEnv = []string{client.EnvURL, "MSB_SERVER_URL", "SANDBOX_BASE_URL"}
	// tokenEnv: ours, then the MCP server's.
	tokenEnv = []string{client.EnvToken, "MSB_API_KEY"}
)

// envRunTimeout is how long an execution may take when its call gives no
// timeout, as the Go and Python SDKs and code-interpreter clients read it:
// positive seconds, or a duration such as 1m30s. It is the default of the
// --timeout of the commands that run code or a command (runTimeout), and
// of the tool calls of "agent2env mcp". It bounds no request: a command
// waits for the daemon as long as the command runs.
const envRunTimeout = client.EnvTimeout

// clientConfig holds the flags every client command shares. Commands read
// the resulting settings with resolve, or a client with client.
type clientConfig struct {
	url, token string
	debug      bool
}

// register adds the client flags to c and its subcommands.
func (cc *clientConfig) register(c *cobra.Command) {
	f := c.PersistentFlags()
	f.StringVar(&cc.url, "url", "", fmt.Sprintf("daemon URL (default: $%s, the config file's url, or %s)",
		strings.Join(urlEnv, ", $"), client.DefaultURL))
	// No default is shown: it would print the token in help.
	f.StringVar(&cc.token, "token", "", fmt.Sprintf("API bearer token (default: $%s, or the config file's token when the URL is its url)",
		strings.Join(tokenEnv, ", $")))
	f.BoolVar(&cc.debug, "debug", false, "print each HTTP request and response (without the token) to stderr")
}

// fileConfig is the client config file.
type fileConfig struct {
	URL   string `yaml:"url,omitempty"`
	Token string `yaml:"token,omitempty"`
}

// configPath is $XDG_CONFIG_HOME/agent2env/config.yaml, by default under
// ~/.config.
func configPath(e env) (string, error) {
	dir := e.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := e.getenv("HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return "", fmt.Errorf("find the config file: %w", err)
			}
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "agent2env", "config.yaml"), nil
}

// readConfigFile reads the config file at path; a missing file is an empty
// configuration, an unknown key an error.
func readConfigFile(path string) (fileConfig, error) {
	var fc fileConfig
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fc, nil
	}
	if err != nil {
		return fc, fmt.Errorf("read config file: %w", err)
	}
	// A misspelt key would otherwise be dropped in silence, and with it,
	// say, the token.
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		var root yaml.Node
		_ = yaml.Unmarshal(b, &root)
		p := yamlerr.Explain(err, &root)
		if strings.HasPrefix(p.Msg, "unknown field ") {
			p.Msg += " (the file takes url and token)"
		}
		return fc, fmt.Errorf("read config file %s: %s", path, p)
	}
	return fc, nil
}

// writeConfigFile writes fc to path, readable by its owner only, replacing
// what was there at once.
func writeConfigFile(path string, fc fileConfig) error {
	b, err := yaml.Marshal(fc)
	if err != nil {
		return err
	}
	b = append([]byte("# agent2env client configuration, written by \"agent2env login\".\n"), b...)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write config file: %w", err)
	}
	// In the file's directory, so that the rename below replaces it in one
	// step: a reader sees the old file or the new, never half of one.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("write config file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// CreateTemp makes the file 0600 already; say so for the reader.
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write config file %s: %w", path, err)
	}
	return nil
}

// settings are the resolved client settings.
type settings struct {
	url, token string
}

// resolve works out the client settings. The config file is read only
// when the flags and the environment leave something to it.
func (cc *clientConfig) resolve(e env) (settings, error) {
	s := settings{url: cc.url, token: cc.token}
	for _, k := range urlEnv {
		if s.url == "" {
			s.url = e.getenv(k)
		}
	}
	for _, k := range tokenEnv {
		if s.token == "" {
			s.token = e.getenv(k)
		}
	}
	if s.url == "" || s.token == "" {
		// Without a home directory (a service, a bare container) there
		// is no config file: the flags, the environment and the
		// defaults say it all, as they do when the file is missing.
		var fc fileConfig
		if path, err := configPath(e); err == nil {
			if fc, err = readConfigFile(path); err != nil {
				return s, err
			}
		}
		// The file's token goes to the file's daemon only, not to one a
		// flag or the environment names.
		if s.token == "" && (s.url == "" || baseURL(s.url) == baseURL(fc.URL)) {
			s.token = fc.Token
		}
		s.url = cmp.Or(s.url, fc.URL, client.DefaultURL)
	}
	return s, nil
}

// baseURL is u as the client takes it: without a trailing slash or
// /api/v1.
func baseURL(u string) string {
	return strings.TrimSuffix(strings.TrimRight(strings.TrimSpace(u), "/"), "/api/v1")
}

// runTimeout is how long the execution a command starts may take: flag,
// the value of c's --timeout, when the user gave it, else $SANDBOX_TIMEOUT;
// 0 leaves it to the daemon.
func runTimeout(c *cobra.Command, e env, flag time.Duration) (time.Duration, error) {
	if c.Flags().Changed("timeout") {
		return flag, nil
	}
	return timeoutFromEnv(e)
}

// timeoutFromEnv is $SANDBOX_TIMEOUT; 0 when it is unset.
func timeoutFromEnv(e env) (time.Duration, error) {
	v := e.getenv(envRunTimeout)
	if v == "" {
		return 0, nil
	}
	d, err := parseTimeout(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", envRunTimeout, v, err)
	}
	return d, nil
}

// parseTimeout parses a timeout as the SDKs read $SANDBOX_TIMEOUT: a
// positive number of seconds, or a duration such as 1m30s.
func parseTimeout(s string) (time.Duration, error) {
	d, err := parseSecondsOrDuration(s)
	if err == nil && d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, err
}

// parseSecondsOrDuration parses a number of seconds, such as 90 or 1.5,
// or a duration such as 1m30s.
func parseSecondsOrDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, errors.New("want seconds or a duration such as 1m30s")
	}
	switch limit := float64(math.MaxInt64 / time.Second); {
	case n >= limit:
		return 0, errTooLong
	case n <= -limit:
		return math.MinInt64, nil // negative, which no caller takes
	}
	return time.Duration(n * float64(time.Second)), nil
}

// errTooLong is a number of seconds past the longest time.Duration.
var errTooLong = errors.New("too long")

// timeoutFlag is the value of a --timeout flag: seconds or a duration,
// as $SANDBOX_TIMEOUT is read, so that every command's --timeout takes
// the same values; 0, the default, leaves the timeout to the daemon.
type timeoutFlag struct{ d *time.Duration }

// timeoutVar defines the --timeout flag of fs, into d. Its usage names the
// value SECONDS; a duration is taken too.
func timeoutVar(fs *pflag.FlagSet, d *time.Duration, usage string) {
	fs.Var(timeoutFlag{d}, "timeout", usage)
}

func (f timeoutFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "0"
	}
	return f.d.String()
}

func (f timeoutFlag) Type() string { return "timeout" }

func (f timeoutFlag) Set(s string) error {
	d, err := parseSecondsOrDuration(s)
	switch {
	case errors.Is(err, errTooLong):
		d = math.MaxInt64 // longer than any daemon takes: it caps the timeout or says its maximum
	case err != nil:
		return err
	case d < 0:
		return errors.New("must not be negative")
	}
	*f.d = d
	return nil
}

// seconds is d in whole seconds, as the APIs that count them take it: a
// part of one is one more.
func seconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

// client returns an API client for the resolved settings.
func (cc *clientConfig) client(e env) (*client.Client, error) {
	s, err := cc.resolve(e)
	if err != nil {
		return nil, err
	}
	return newClient(e, s, cc.debug)
}

func newClient(e env, s settings, debug bool) (*client.Client, error) {
	return client.New(s.url, client.WithToken(s.token), client.WithUserAgent("agent2env-cli"),
		client.WithHTTPClient(&http.Client{Transport: transport(e, s, debug)}))
}

// transport is what the CLI's requests go through: the default transport,
// printing each exchange when debug is on. It bounds no wait for an
// answer: a sandbox being created may wait for its image, an execution
// answers when it ends; Ctrl-C interrupts either.
func transport(e env, s settings, debug bool) http.RoundTripper {
	if !debug {
		return http.DefaultTransport
	}
	return &debugTransport{next: http.DefaultTransport, w: e.stderr, secret: s.token}
}

// debugTransport prints each request and response line and headers to w,
// with secret (the token) and credentials headers redacted.
type debugTransport struct {
	next   http.RoundTripper
	w      io.Writer
	secret string
}

func (d *debugTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "> %s %s\n", req.Method, req.URL)
	d.headers(&b, "> ", req.Header)
	start := time.Now()
	resp, err := d.next.RoundTrip(req)
	took := time.Since(start).Round(time.Microsecond)
	if err != nil {
		fmt.Fprintf(&b, "< error after %s: %v\n", took, err)
	} else {
		fmt.Fprintf(&b, "< %s %s (%s)\n", resp.Proto, resp.Status, took)
		d.headers(&b, "< ", resp.Header)
	}
	io.WriteString(d.w, b.String())
	return resp, err
}

// credentialHeaders are never printed as they are.
var credentialHeaders = map[string]bool{"Authorization": true, "X-Access-Token": true, "Cookie": true, "Set-Cookie": true}

func (d *debugTransport) headers(b *strings.Builder, prefix string, h http.Header) {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			switch {
			case credentialHeaders[http.CanonicalHeaderKey(k)]:
				scheme, _, ok := strings.Cut(v, " ")
				if !ok {
					scheme = ""
				}
				v = strings.TrimSpace(scheme + " [redacted]")
			case d.secret != "":
				v = strings.ReplaceAll(v, d.secret, "[redacted]")
			}
			fmt.Fprintf(b, "%s%s: %s\n", prefix, k, v)
		}
	}
}

func newLoginCmd(e env, cc *clientConfig) *cobra.Command {
	var tokenStdin, verify bool
	c := &cobra.Command{
		Use:   "login [flags]",
		Short: "save the daemon's URL and token in the config file that client commands read",
		Long: `login saves --url and --token in $XDG_CONFIG_HOME/agent2env/config.yaml (default
~/.config/agent2env/config.yaml), readable by you only. Client commands use them unless
their --url and --token flags or the environment say otherwise.`,
		Example: `  agent2env login --url https://sandboxes.example.com --token a2e_...
  pass show agent2env | agent2env login --url https://sandboxes.example.com --token-stdin`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return login(c, e, cc, tokenStdin, verify)
		},
	}
	c.Flags().BoolVar(&tokenStdin, "token-stdin", false, "read the token from standard input (keeps it out of the shell history)")
	c.Flags().BoolVar(&verify, "verify", true, "check that the daemon answers and accepts the token before saving")
	return c
}

func login(c *cobra.Command, e env, cc *clientConfig, tokenStdin, verify bool) error {
	if tokenStdin {
		if cc.token != "" {
			return usageErrorf(c, "give --token or --token-stdin, not both")
		}
		b, err := io.ReadAll(e.in())
		if err != nil {
			return fmt.Errorf("read the token from standard input: %w", err)
		}
		cc.token = strings.TrimSpace(string(b))
		if cc.token == "" {
			// Else the token of the environment or the file would be
			// saved as if given.
			return errors.New("--token-stdin: standard input held no token")
		}
	}
	s, err := cc.resolve(e)
	if err != nil {
		return err
	}
	cl, err := newClient(e, s, cc.debug)
	if err != nil {
		return err
	}
	if verify {
		// Any authenticated request would do; this one is small.
		if _, err := cl.Template.List(c.Context(), client.ListTemplatesOptions{Page: 1, PageSize: 1}); err != nil {
			return fmt.Errorf("check %s (save anyway with --verify=false): %w", s.url, err)
		}
	}
	path, err := configPath(e)
	if err != nil {
		return err
	}
	if err := writeConfigFile(path, fileConfig{URL: s.url, Token: s.token}); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "saved %s for %s\n", path, s.url)
	return nil
}
