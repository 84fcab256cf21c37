// Package auth holds the daemon's API keys and decides whether a request
// carries one.
//
// Keys come from a file and from the AGENT2ENV_API_KEYS environment
// variable (see Load). Only their SHA-256 hashes are kept in memory, and
// a presented key is compared with every one of them in constant time.
// Clients send a key as `Authorization: Bearer <key>`, as LiteBoxd's SDKs
// do. Auth is on whenever keys are configured, and a daemon that listens
// beyond loopback refuses to start without them (Required).
//
// A request's context carries whose it is: its tenant (WithTenant,
// TenantOf: Tenant of its API key; SandboxTenant or RunTenant for what a
// sandbox's or a task run's own code asks of the daemon's services), which
// scopes what clients name by ids of their choosing, and, for a request
// that came on a sandbox's own channel, the sandbox that owns what it
// makes (WithOwner, OwnerOf; tenant.go and owner.go).
package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Environment variables the CLI reads keys from.
const (
	// EnvKeys holds keys, comma-separated.
	EnvKeys = "AGENT2ENV_API_KEYS"
	// EnvKeysFile names a keys file.
	EnvKeysFile = "AGENT2ENV_API_KEYS_FILE"
)

// KeyPrefix starts every key NewKey makes (LiteBoxd's are "lbxk_").
const KeyPrefix = "a2e_"

// MinKeyLength is the shortest key Load accepts.
const MinKeyLength = 16

// hashPrefix marks a line of a keys file that holds a key's hash (as
// Hash returns it) rather than the key.
const hashPrefix = "sha256:"

// The errors of Check, both errdefs.ErrUnauthenticated. Their messages
// are LiteBoxd's.
var (
	ErrNoKey      error = authError("authentication required")
	ErrInvalidKey error = authError("invalid or expired API key")
)

type authError string

func (e authError) Error() string        { return string(e) }
func (e authError) Is(target error) bool { return target == errdefs.ErrUnauthenticated }

// Keys is a set of API keys, held as SHA-256 hashes. A nil or empty Keys
// accepts no key. It is immutable and safe for concurrent use.
type Keys struct {
	hashes [][sha256.Size]byte
}

// NewKey returns a new random key: KeyPrefix and 64 hex digits (256 bits).
func NewKey() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return KeyPrefix + hex.EncodeToString(b)
}

// Hash returns the line a keys file can hold instead of key:
// "sha256:<64 hex>".
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// NewKeys returns the set of keys.
func NewKeys(keys ...string) (*Keys, error) {
	var b builder
	for i, k := range keys {
		if err := b.add(k, fmt.Sprintf("key %d", i+1)); err != nil {
			return nil, err
		}
	}
	return b.keys(), nil
}

// Load returns the keys of the file at path (if path is not "") and of
// list, a comma-separated list such as the value of EnvKeys. A keys file
// has one key a line, or a key's Hash; blank lines and lines starting
// with '#' are ignored. Every key must have MinKeyLength characters and
// no white space. Errors never quote a key.
func Load(path, list string) (*Keys, error) {
	var b builder
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read api keys: %w", err)
		}
		if err := b.parse(bytes.NewReader(data), path); err != nil {
			return nil, err
		}
	}
	for i, k := range strings.Split(list, ",") {
		if k = strings.TrimSpace(k); k != "" {
			if err := b.add(k, fmt.Sprintf("%s entry %d", EnvKeys, i+1)); err != nil {
				return nil, err
			}
		}
	}
	return b.keys(), nil
}

// builder collects distinct hashes.
type builder struct {
	seen   map[[sha256.Size]byte]bool
	hashes [][sha256.Size]byte
}

func (b *builder) parse(r io.Reader, name string) error {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("%s line %d", name, n)
		if hexSum, ok := strings.CutPrefix(line, hashPrefix); ok {
			sum, err := hex.DecodeString(hexSum)
			if err != nil || len(sum) != sha256.Size {
				return errdefs.Invalid("api keys: %s: a hash is %s and 64 hex digits", where, hashPrefix)
			}
			b.addHash([sha256.Size]byte(sum))
			continue
		}
		if err := b.add(line, where); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read api keys %s: %w", name, err)
	}
	return nil
}

func (b *builder) add(key, where string) error {
	if strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return errdefs.Invalid("api keys: %s has white space or control characters", where)
	}
	if len(key) < MinKeyLength {
		return errdefs.Invalid("api keys: %s is %d characters, fewer than %d (`agent2env apikey create` makes good ones)", where, len(key), MinKeyLength)
	}
	b.addHash(sha256.Sum256([]byte(key)))
	return nil
}

func (b *builder) addHash(h [sha256.Size]byte) {
	if b.seen == nil {
		b.seen = map[[sha256.Size]byte]bool{}
	}
	if !b.seen[h] {
		b.seen[h] = true
		b.hashes = append(b.hashes, h)
	}
}

func (b *builder) keys() *Keys { return &Keys{hashes: b.hashes} }

// Len returns the number of distinct keys.
func (k *Keys) Len() int {
	if k == nil {
		return 0
	}
	return len(k.hashes)
}

// Valid reports whether key is one of k's.
func (k *Keys) Valid(key string) bool {
	if k == nil || key == "" {
		return false
	}
	sum := sha256.Sum256([]byte(key))
	// Compare with every hash, so the time taken says nothing about
	// which one matched or how many there are before it.
	match := 0
	for _, h := range k.hashes {
		match |= subtle.ConstantTimeCompare(sum[:], h[:])
	}
	return match == 1
}

// Check checks the value of a request's Authorization header, as
// LiteBoxd does: a Bearer credential must be a valid key (ErrInvalidKey
// otherwise); without one (no header, another scheme, an empty token) it
// is ErrNoKey. The scheme is matched without regard to case (RFC 9110).
func (k *Keys) Check(authorization string) error {
	scheme, token, ok := strings.Cut(authorization, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return ErrNoKey
	}
	if !k.Valid(token) {
		return ErrInvalidKey
	}
	return nil
}

// Required reports whether the API must demand keys: whenever keys are
// configured. Without keys it is an error to listen beyond loopback (on
// all interfaces, a non-loopback address or a host name other than
// localhost), since anyone who reaches the port could then run code.
func Required(listenAddr string, keysConfigured bool) (bool, error) {
	if keysConfigured {
		return true, nil
	}
	host, _, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return false, errdefs.Invalid("listen address %q: %v", listenAddr, err)
	}
	if loopback(host) {
		return false, nil
	}
	return false, errdefs.Invalid("refusing to serve on %s without API keys: that address is reachable beyond this host, "+
		"and anyone who reaches it could run code in sandboxes. Configure keys with %s=<key>[,<key>...] "+
		"or a keys file (one key per line) named by %s, making a key with `agent2env apikey create`; "+
		"or listen on 127.0.0.1", listenAddr, EnvKeys, EnvKeysFile)
}

// loopback reports whether host (from a listen address) is only
// reachable from this machine.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}
