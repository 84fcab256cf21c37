package session

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// mounts returns the shared volumes of a new session's sandbox: each
// volume whole when it is common, else the session's own subdirectory of
// it, made on first use and owned by the sandbox user. Nothing a session
// names leads out of the volume: the subdirectory's name is made from the
// session key, and an existing one must be a directory, not a symlink.
func (s *Service) mounts(sess *store.Session) ([]sandbox.Mount, error) {
	var out []sandbox.Mount
	for _, v := range s.cfg.Volumes {
		src := v.Host
		if !v.Common {
			var err error
			if src, err = sessionDir(v.Host, sess.Key); err != nil {
				return nil, err
			}
		}
		m := sandbox.Mount{Source: src, Destination: v.Guest, ReadOnly: v.ReadOnly}
		if err := m.Check(); err != nil {
			return nil, fmt.Errorf("shared volume %s: %w", v.Host, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// sessionDir returns the directory of session key in volume root, making
// it when it does not exist.
func sessionDir(root, key string) (string, error) {
	fi, err := os.Stat(root)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("shared volume %s is not a directory: %w", root, errors.Join(err, errdefs.ErrFailedPrecondition))
	}
	dir := filepath.Join(root, SubdirName(key))
	switch fi, err := os.Lstat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("make the session's directory of shared volume %s: %w", root, err)
		}
		if err := os.Lchown(dir, sandbox.UserID, sandbox.GroupID); err != nil {
			return "", fmt.Errorf("give the session's directory of shared volume %s to the sandbox user: %w", root, err)
		}
		return sessionDir(root, key) // check what is there now
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", errdefs.Precondition("shared volume %s: %s is not a directory (a symlink is refused)", root, dir)
	}
	return dir, nil
}

// SubdirName is the name of session key's directory in a shared volume:
// the session id when it is a plain name (with its tenant before it, when
// it has one), else the id's plain characters and a digest of the key.
// It never contains '/' and is never "." or "..".
func SubdirName(key string) string {
	tenant, id, _ := strings.Cut(key, "/")
	plain := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, id)
	name := plain
	if tenant != "" {
		name = tenant + "-" + plain
	}
	if plain != id || strings.HasPrefix(plain, ".") || len(name) > 200 {
		sum := sha256.Sum256([]byte(key))
		name = strings.TrimLeft(plain, ".")
		if len(name) > 64 {
			name = name[:64]
		}
		name += "-" + hex.EncodeToString(sum[:8])
	}
	return name
}
