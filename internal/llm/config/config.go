// Package config reads the LLM proxy's YAML configuration file (serve
// --llm-config): providers and their keys (read from the daemon's
// environment, never written in the file), model entries with aliases and
// fallbacks, per-entry timeouts, retries with back-off, the client headers
// that may choose the account of a provider's key, and the default
// budgets and rate limits of keys, sandboxes and runs. Errors name the
// file and line. Load reads a file; File.Proxy turns it into the proxy's
// configuration.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/llm/gate"
	"github.com/agent2env/agent2env/internal/llm/proxy"
	"github.com/agent2env/agent2env/internal/llm/replay"
	"github.com/agent2env/agent2env/internal/yamlerr"
)

// File is the configuration file.
type File struct {
	Providers []Provider `yaml:"providers"`
	Models    []Model    `yaml:"models"`
	// Timeout is the default of every model entry's timeout. Default 10m.
	Timeout time.Duration `yaml:"timeout"`
	Retries Retries       `yaml:"retries"`
	// Limits are the default budgets and rate limits of keys, sandboxes
	// and runs; a key's own limits replace the key defaults.
	Limits gate.Limits `yaml:"limits"`

	path string
	root *yaml.Node
}

// Provider is an upstream.
type Provider struct {
	Name string `yaml:"name"`
	// Type: openai, openai-responses, anthropic, gemini or replay.
	Type    string `yaml:"type"`
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the daemon's environment variable holding the key.
	APIKeyEnv string `yaml:"api_key_env"`
	// Script is a replay provider's script file (relative to this file).
	Script string `yaml:"script"`
	// ForwardHeaders are the account-selecting headers (OpenAI-Organization,
	// OpenAI-Project, ChatGPT-Account-ID, X-Goog-User-Project) a sandbox may
	// choose for this provider's key; by default they are dropped.
	ForwardHeaders []string `yaml:"forward_headers"`
}

// Model is what clients ask for by Name or one of its Aliases.
type Model struct {
	Name      string        `yaml:"name"`
	Aliases   []string      `yaml:"aliases"`
	Provider  string        `yaml:"provider"`
	Model     string        `yaml:"model"`
	Fallbacks []string      `yaml:"fallbacks"`
	Timeout   time.Duration `yaml:"timeout"`
}

// Retries is the retry policy of every entry.
type Retries struct {
	// Attempts after the first try. Default 2; 0 turns retries off when
	// written explicitly.
	Attempts *int `yaml:"attempts"`
	// Backoff before the first retry, doubling up to MaxBackoff. Defaults
	// 500ms and 8s.
	Backoff    time.Duration `yaml:"backoff"`
	MaxBackoff time.Duration `yaml:"max_backoff"`
}

// Defaults.
const (
	DefaultTimeout    = 10 * time.Minute
	DefaultAttempts   = 2
	DefaultBackoff    = 500 * time.Millisecond
	DefaultMaxBackoff = 8 * time.Second
)

// Error is a problem at a place in the file.
type Error struct {
	Path string
	Line int // 0 when the file could not be placed
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("llm config %s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("llm config %s: %s", e.Path, e.Msg)
}

// Is makes an Error an errdefs.ErrInvalidArgument.
func (e *Error) Is(target error) bool { return target == errdefs.ErrInvalidArgument }

// Load reads and checks the file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read llm config: %w", err)
	}
	return Parse(path, data)
}

// Parse reads and checks a file's contents; path is for errors and
// relative script paths.
func Parse(path string, data []byte) (*File, error) {
	f := &File{path: path, root: &yaml.Node{}}
	if err := yaml.Unmarshal(data, f.root); err != nil {
		return nil, f.yamlError(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil && !errors.Is(err, io.EOF) {
		return nil, f.yamlError(err)
	}
	if f.Timeout == 0 {
		f.Timeout = DefaultTimeout
	}
	if f.Retries.Attempts == nil {
		n := DefaultAttempts
		f.Retries.Attempts = &n
	}
	if f.Retries.Backoff == 0 {
		f.Retries.Backoff = DefaultBackoff
	}
	if f.Retries.MaxBackoff == 0 {
		f.Retries.MaxBackoff = DefaultMaxBackoff
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// yamlError places yaml's own errors ("yaml: line 3: ...") in the file,
// in its words (yamlerr).
func (f *File) yamlError(err error) error {
	p := yamlerr.Explain(err, f.root)
	return &Error{Path: f.path, Line: p.Line, Msg: p.Msg}
}

// errAt is an error at the node of a path of keys and indexes ("models",
// 2, "provider"), or at the closest node that exists.
func (f *File) errAt(msg string, path ...any) error {
	return &Error{Path: f.path, Line: lineOf(f.root, path...), Msg: msg}
}

func lineOf(n *yaml.Node, path ...any) int {
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, p := range path {
		var next *yaml.Node
		switch p := p.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == p {
						next = n.Content[i+1]
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && p < len(n.Content) {
				next = n.Content[p]
			}
		}
		if next == nil {
			return line
		}
		n, line = next, next.Line
	}
	return line
}

var types = map[string]bool{"openai": true, "openai-responses": true, "anthropic": true, "gemini": true, proxy.TypeReplay: true}

func (f *File) validate() error {
	providers := map[string]bool{}
	for i, p := range f.Providers {
		switch {
		case p.Name == "":
			return f.errAt("providers: an entry has no name", "providers", i)
		case providers[p.Name]:
			return f.errAt(fmt.Sprintf("provider %q is defined twice", p.Name), "providers", i, "name")
		case !types[p.Type]:
			return f.errAt(fmt.Sprintf("provider %q: type %q is not one of openai, openai-responses, anthropic, gemini, replay", p.Name, p.Type), "providers", i, "type")
		case p.Type == proxy.TypeReplay && p.Script == "":
			return f.errAt(fmt.Sprintf("provider %q: a replay provider needs a script", p.Name), "providers", i)
		case p.Type != proxy.TypeReplay && p.BaseURL == "":
			return f.errAt(fmt.Sprintf("provider %q: base_url is missing", p.Name), "providers", i)
		case p.Type != proxy.TypeReplay && !strings.HasPrefix(p.BaseURL, "http://") && !strings.HasPrefix(p.BaseURL, "https://"):
			return f.errAt(fmt.Sprintf("provider %q: base_url %q is not an http(s) URL", p.Name, p.BaseURL), "providers", i, "base_url")
		}
		for k, h := range p.ForwardHeaders {
			if err := proxy.CheckForwardHeader(h); err != nil {
				return f.errAt(fmt.Sprintf("provider %q: %v", p.Name, err), "providers", i, "forward_headers", k)
			}
		}
		providers[p.Name] = true
	}
	names := map[string]bool{}
	for i, m := range f.Models {
		if m.Name == "" {
			return f.errAt("models: an entry has no name", "models", i)
		}
		for k, n := range append([]string{m.Name}, m.Aliases...) {
			if names[n] {
				at := []any{"models", i, "name"}
				if k > 0 {
					at = []any{"models", i, "aliases", k - 1}
				}
				return f.errAt(fmt.Sprintf("model name %q is used twice", n), at...)
			}
			names[n] = true
		}
		if !providers[m.Provider] {
			return f.errAt(fmt.Sprintf("model %q: unknown provider %q", m.Name, m.Provider), "models", i, "provider")
		}
		if m.Timeout < 0 {
			return f.errAt(fmt.Sprintf("model %q: timeout must not be negative", m.Name), "models", i, "timeout")
		}
	}
	for i, m := range f.Models {
		for k, fb := range m.Fallbacks {
			if !names[fb] {
				return f.errAt(fmt.Sprintf("model %q: unknown fallback %q", m.Name, fb), "models", i, "fallbacks", k)
			}
		}
	}
	if *f.Retries.Attempts < 0 || f.Retries.Backoff < 0 || f.Retries.MaxBackoff < 0 {
		return f.errAt("retries must not be negative", "retries")
	}
	if f.Timeout < 0 {
		return f.errAt("timeout must not be negative", "timeout")
	}
	for _, l := range []struct {
		name string
		l    gate.Limit
	}{{"key", f.Limits.Key}, {"sandbox", f.Limits.Sandbox}, {"run", f.Limits.Run}} {
		if l.l.RequestsPerMinute < 0 || l.l.TokensPerMinute < 0 || l.l.BudgetTokens < 0 {
			return f.errAt("limits must not be negative", "limits", l.name)
		}
	}
	return nil
}

// Proxy is the proxy configuration of f: keys read with getenv
// (os.Getenv when nil), replay scripts read, aliases made entries.
func (f *File) Proxy(getenv func(string) string) (proxy.Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := proxy.Config{Retry: proxy.Retry{Attempts: *f.Retries.Attempts, Backoff: f.Retries.Backoff, MaxBackoff: f.Retries.MaxBackoff}}
	for i, p := range f.Providers {
		pr := proxy.Provider{Name: p.Name, Type: p.Type, BaseURL: p.BaseURL, ForwardHeaders: p.ForwardHeaders}
		if p.APIKeyEnv != "" {
			if pr.APIKey = getenv(p.APIKeyEnv); pr.APIKey == "" {
				return proxy.Config{}, f.errAt(fmt.Sprintf("provider %q: api_key_env %s is not set in the daemon's environment", p.Name, p.APIKeyEnv), "providers", i, "api_key_env")
			}
		}
		if p.Type == proxy.TypeReplay {
			path := p.Script
			if !filepath.IsAbs(path) {
				path = filepath.Join(filepath.Dir(f.path), path)
			}
			data, err := os.ReadFile(path)
			if err == nil {
				pr.Script, err = replay.Load(data)
			}
			if err != nil {
				return proxy.Config{}, f.errAt(fmt.Sprintf("provider %q: script: %v", p.Name, err), "providers", i, "script")
			}
		}
		cfg.Providers = append(cfg.Providers, pr)
	}
	for _, m := range f.Models {
		timeout := m.Timeout
		if timeout == 0 {
			timeout = f.Timeout
		}
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			upstream := m.Model
			if upstream == "" {
				upstream = m.Name
			}
			cfg.Models = append(cfg.Models, proxy.Model{Name: n, Provider: m.Provider, Model: upstream, Fallbacks: m.Fallbacks, Timeout: timeout})
		}
	}
	// The proxy checks again; what it finds is a bug here, not in the file.
	if _, err := proxy.New(cfg); err != nil {
		return proxy.Config{}, &Error{Path: f.path, Msg: err.Error()}
	}
	return cfg, nil
}
