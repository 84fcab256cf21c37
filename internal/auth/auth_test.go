package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/internal/errdefs"
)

const (
	keyA = "a2e_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	keyB = "lbxk_fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	keyC = "a-long-enough-key"
)

func TestNewKey(t *testing.T) {
	format := regexp.MustCompile(`^a2e_[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for range 100 {
		k := NewKey()
		if !format.MatchString(k) {
			t.Fatalf("key %q does not match %s", k, format)
		}
		if seen[k] {
			t.Fatalf("key %q made twice", k)
		}
		seen[k] = true
		keys, err := NewKeys(k)
		if err != nil || !keys.Valid(k) {
			t.Fatalf("a new key is not accepted: %v", err)
		}
	}
}

func TestHash(t *testing.T) {
	// sha256("abc")
	if got, want := Hash("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("Hash(abc) = %s, want %s", got, want)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name  string
		file  string // "" for no file
		list  string
		n     int
		valid []string
		bad   []string
		err   string // substring of the error; "" for none
	}{
		{name: "nothing", n: 0, bad: []string{keyA, ""}},
		{name: "env list", list: keyA + ", " + keyB + ",,", n: 2, valid: []string{keyA, keyB}, bad: []string{keyC, keyA + " ", "a2e_"}},
		{name: "file", file: "# laptop\n" + keyA + "\n\n   \n  " + keyB + "  \n# " + keyC + "\n", n: 2, valid: []string{keyA, keyB}, bad: []string{keyC}},
		{name: "file and env", file: keyA + "\n", list: keyC, n: 2, valid: []string{keyA, keyC}},
		{name: "duplicates count once", file: keyA + "\n" + keyA + "\n" + Hash(keyA) + "\n", list: keyA, n: 1, valid: []string{keyA}},
		{name: "hash line", file: Hash(keyB) + "\n", n: 1, valid: []string{keyB}, bad: []string{Hash(keyB), "sha256:" + keyB}},
		{name: "crlf file", file: keyA + "\r\n" + keyB + "\r\n", n: 2, valid: []string{keyA, keyB}},
		{name: "brief key in env", list: "short", err: EnvKeys + " entry 1 is 5 characters"},
		{name: "brief key in file", file: keyA + "\nshort\n", err: "line 2 is 5 characters"},
		{name: "space in key", file: "two words in a line\n", err: "line 1 has white space"},
		{name: "control character", list: keyA + "\x00x", err: "control characters"},
		{name: "bad hash", file: "sha256:abc\n", err: "line 1: a hash is"},
		{name: "missing file", file: "\x00missing", err: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			switch {
			case tt.file == "\x00missing":
				path = filepath.Join(t.TempDir(), "nope")
			case tt.file != "":
				path = filepath.Join(t.TempDir(), "keys")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			keys, err := Load(path, tt.list)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("load: %v, want an error with %q", err, tt.err)
				}
				for _, k := range []string{keyA, keyB, "short", "two words"} {
					if strings.Contains(err.Error(), k) {
						t.Errorf("error %q quotes a key", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if keys.Len() != tt.n {
				t.Errorf("%d keys, want %d", keys.Len(), tt.n)
			}
			for _, k := range tt.valid {
				if !keys.Valid(k) {
					t.Errorf("key %q not accepted", k)
				}
			}
			for _, k := range tt.bad {
				if keys.Valid(k) {
					t.Errorf("key %q accepted", k)
				}
			}
		})
	}
}

func TestNilKeys(t *testing.T) {
	var k *Keys
	if k.Len() != 0 || k.Valid(keyA) || !errors.Is(k.Check("Bearer "+keyA), ErrInvalidKey) {
		t.Error("a nil Keys accepts something")
	}
	if _, err := NewKeys("short"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("NewKeys(short): %v", err)
	}
}

func TestCheck(t *testing.T) {
	keys, err := NewKeys(keyA, keyB)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		header string
		want   error
	}{
		{"Bearer " + keyA, nil},
		{"Bearer " + keyB, nil},
		{"bearer " + keyA, nil},
		{"BEARER  " + keyA + " ", nil},
		{"", ErrNoKey},
		{"Bearer", ErrNoKey},
		{"Bearer ", ErrNoKey},
		{"Bearer    ", ErrNoKey},
		{"Basic dXNlcjpwYXNz", ErrNoKey},
		{keyA, ErrNoKey},
		{"Token " + keyA, ErrNoKey},
		{"Bearer " + keyC, ErrInvalidKey},
		{"Bearer " + keyA + "x", ErrInvalidKey},
		{"Bearer " + keyA[:len(keyA)-1], ErrInvalidKey},
		{"Bearer " + strings.ToUpper(keyA), ErrInvalidKey},
		{"Bearer " + Hash(keyA), ErrInvalidKey},
		{"Bearer " + keyA + " " + keyB, ErrInvalidKey},
	}
	for _, tt := range tests {
		err := keys.Check(tt.header)
		if err != tt.want {
			t.Errorf("Check(%q) = %v, want %v", tt.header, err, tt.want)
		}
		if err != nil && !errors.Is(err, errdefs.ErrUnauthenticated) {
			t.Errorf("Check(%q) = %v, not an ErrUnauthenticated", tt.header, err)
		}
	}
	if ErrNoKey.Error() != "authentication required" || ErrInvalidKey.Error() != "invalid or expired API key" {
		t.Errorf("messages differ from LiteBoxd's: %q, %q", ErrNoKey, ErrInvalidKey)
	}
}

func TestRequired(t *testing.T) {
	tests := []struct {
		addr     string
		keys     bool
		required bool
		err      bool
	}{
		{"127.0.0.1:8080", false, false, false},
		{"127.0.0.2:8080", false, false, false},
		{"[::1]:8080", false, false, false},
		{"[::ffff:127.0.0.1]:8080", false, false, false},
		{"localhost:8080", false, false, false},
		{"LOCALHOST:8080", false, false, false},
		{"127.0.0.1:8080", true, true, false},
		{"0.0.0.0:8080", true, true, false},
		{":8080", true, true, false},
		{"0.0.0.0:8080", false, false, true},
		{":8080", false, false, true},
		{"[::]:8080", false, false, true},
		{"192.168.1.10:8080", false, false, true},
		{"[fe80::1%eth0]:8080", false, false, true},
		{"example.com:8080", false, false, true},
		{"localhost.example.com:8080", false, false, true},
		{"127.0.0.1", false, false, true}, // no port: not an address
	}
	for _, tt := range tests {
		required, err := Required(tt.addr, tt.keys)
		if required != tt.required || (err != nil) != tt.err {
			t.Errorf("Required(%q, %v) = %v, %v; want %v, error %v", tt.addr, tt.keys, required, err, tt.required, tt.err)
		}
	}
	_, err := Required("0.0.0.0:8080", false)
	for _, want := range []string{"0.0.0.0:8080", EnvKeys, EnvKeysFile, "agent2env apikey create", "127.0.0.1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestBearer(t *testing.T) {
	for in, want := range map[string]string{"Bearer k1": "k1", "bearer  k2 ": "k2", "Basic x": "", "Bearer ": "", "": ""} {
		if got, ok := Bearer(in); got != want && ok || ok != (want != "") {
			t.Errorf("Bearer(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if Tenant("key-1") == Tenant("key-2") || len(Tenant("key-1")) != 24 {
		t.Errorf("tenants %q %q", Tenant("key-1"), Tenant("key-2"))
	}
	if got := TenantOf(WithTenant(context.Background(), "t")); got != "t" || TenantOf(context.Background()) != "" {
		t.Errorf("TenantOf: %q", got)
	}
}
