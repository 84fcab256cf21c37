package service

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strconv"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// HomeDir is the home directory of a sandbox's user, whatever its image
// says: where agents' configuration files go.
const HomeDir = sandbox.HomeDir

// CleanPath is the path of a file in a sandbox as every file operation
// takes it from a client: a relative path is taken from the sandbox's
// working directory, and one that steps out with ".." or holds NUL is
// ErrInvalidArgument. Surfaces that echo the path back show this form.
func CleanPath(p string) (string, error) { return manager.CleanPath(p) }

// FileStat is a file of a sandbox as a daemon service walking its files
// sees it: the API's FileInfo, and the type the wire leaves out.
type FileStat struct {
	api.FileInfo
	// Regular says it is a regular file (not a directory, link, device
	// or pipe).
	Regular bool
	// Link is a symbolic link's target; "" for other files.
	Link string
	// FullMode is the file's mode: its type and permission bits.
	FullMode fs.FileMode
	// UID and GID own the file.
	UID, GID int
}

// SandboxUser is the name of the user commands run as (sandbox.UserID,
// and its group's) in agent2env's images.
const SandboxUser = "sandbox"

// UserName is the name of user or group id in a sandbox of agent2env's
// images: root, SandboxUser, or the number.
func UserName(id int) string {
	switch id {
	case 0:
		return "root"
	case sandbox.UserID:
		return SandboxUser
	}
	return strconv.Itoa(id)
}

// fileInfo is the API's view of fi.
func fileInfo(fi agent.FileInfo) api.FileInfo {
	return api.FileInfo{Name: fi.Name, Path: fi.Path, Size: fi.Size, Mode: fmt.Sprintf("%04o", fi.Mode.Perm()),
		ModTime: fi.ModTime, IsDir: fi.IsDir}
}

// fileStat is fi with its type.
func fileStat(fi agent.FileInfo) FileStat {
	return FileStat{FileInfo: fileInfo(fi), Regular: fi.Mode.IsRegular(), Link: fi.Link, FullMode: fi.Mode, UID: fi.UID, GID: fi.GID}
}

// Upload writes content to the file at path in sandbox id with mode's
// permissions, streaming it, and describes the file written. A relative
// path is taken from the sandbox's working directory.
func (s *Sandboxes) Upload(ctx context.Context, id, path string, mode fs.FileMode, content io.Reader) (*api.FileInfo, error) {
	if path == "" {
		return nil, errdefs.Invalid("path is required")
	}
	fi, err := s.m.Upload(ctx, id, path, mode, content)
	if err != nil {
		return nil, err
	}
	out := fileInfo(fi)
	return &out, nil
}

// PutFile sends one file of an UploadFiles: the file at path with mode's
// permissions, read from content to its end.
type PutFile func(path string, mode fs.FileMode, content io.Reader) error

// UploadFiles writes files into sandbox id as one change: files calls put
// for each file, streaming it. Once files returns nil, all of them are put
// in place together and described in the order sent; when it, or a put,
// fails, none is, and what was at their paths is left as it was. Relative
// paths are taken from the sandbox's working directory.
func (s *Sandboxes) UploadFiles(ctx context.Context, id string, files func(put PutFile) error) ([]api.FileInfo, error) {
	fis, err := s.m.UploadFiles(ctx, id, func(put manager.PutFile) error { return files(PutFile(put)) })
	if err != nil {
		return nil, err
	}
	out := make([]api.FileInfo, len(fis))
	for i, fi := range fis {
		out[i] = fileInfo(fi)
	}
	return out, nil
}

// Download opens the file at path in sandbox id; the caller closes it.
// The size is -1 when unknown. A missing file is ErrNotFound
// (FILE_NOT_FOUND).
func (s *Sandboxes) Download(ctx context.Context, id, path string) (io.ReadCloser, int64, error) {
	return s.m.Download(ctx, id, path)
}

// Stat describes the file at path in sandbox id, a symbolic link itself
// rather than its target. A missing file is ErrNotFound (FILE_NOT_FOUND).
func (s *Sandboxes) Stat(ctx context.Context, id, path string) (*FileStat, error) {
	fi, err := s.m.Stat(ctx, id, path)
	if err != nil {
		return nil, err
	}
	out := fileStat(fi)
	return &out, nil
}

// StatTarget describes the file at path in sandbox id as Stat does, but
// follows symbolic links, as the agent's kernel walks them: a link is
// described by the file it leads to. A link that leads nowhere is
// ErrNotFound, a loop ErrInvalidArgument. An agent from before it
// describes a link itself: one that does is refused, as the range of a
// link cannot be known then.
func (s *Sandboxes) StatTarget(ctx context.Context, id, p string) (*FileStat, error) {
	fi, err := s.m.StatTarget(ctx, id, p)
	if err != nil {
		return nil, err
	}
	if fi.Link != "" {
		return nil, errdefs.Precondition("%s is a symbolic link, which this sandbox's agent (older than the daemon) does not follow; name the file it leads to", p)
	}
	out := fileStat(fi)
	return &out, nil
}

// ReadDir describes the entries of directory dir in sandbox id, by name. A
// missing directory is ErrNotFound (FILE_NOT_FOUND).
func (s *Sandboxes) ReadDir(ctx context.Context, id, dir string) ([]FileStat, error) {
	fis, err := s.m.ListDir(ctx, id, dir)
	if err != nil {
		return nil, err
	}
	out := make([]FileStat, len(fis))
	for i, fi := range fis {
		out[i] = fileStat(fi)
	}
	return out, nil
}

// Mkdir makes directory path in sandbox id, and its parents.
func (s *Sandboxes) Mkdir(ctx context.Context, id, path string) error {
	return s.m.Mkdir(ctx, id, path)
}
