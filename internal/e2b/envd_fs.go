package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/e2b/envdpb/filesystem"
	"github.com/agent2env/agent2env/internal/e2b/envdpb/filesystem/filesystemconnect"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// Files is what envd's file routes and filesystem service need of the
// sandbox service.
type Files interface {
	Upload(ctx context.Context, id, path string, mode fs.FileMode, content io.Reader) (*api.FileInfo, error)
	UploadFiles(ctx context.Context, id string, files func(put service.PutFile) error) ([]api.FileInfo, error)
	Download(ctx context.Context, id, path string) (io.ReadCloser, int64, error)
	Stat(ctx context.Context, id, path string) (*service.FileStat, error)
	Walk(ctx context.Context, id, root string, depth int) ([]service.FileStat, bool, error)
	Mkdir(ctx context.Context, id, path string) error
	Move(ctx context.Context, id, from, to string) error
	Remove(ctx context.Context, id, p string, recursive bool) error
	WatchDir(ctx context.Context, id, dir string, recursive bool) (service.DirWatcher, error)
}

var _ Files = (*service.Sandboxes)(nil)

// sandboxUID is the uid of a sandbox's user, whom E2B calls "user".
const sandboxUID = 1000

// filesystemService serves filesystem.Filesystem over a sandbox's files.
type filesystemService struct {
	files   Files
	watches *watchers
}

var _ filesystemconnect.FilesystemHandler = (*filesystemService)(nil)

// ownerName is the name envd gives the owner (or group) uid: the users an
// E2B sandbox has, or the number.
func ownerName(uid int) string {
	switch uid {
	case 0:
		return rootUser
	case sandboxUID:
		return defaultUser
	}
	return strconv.Itoa(uid)
}

// entryType is the FileType of a file of mode m.
func entryType(m fs.FileMode) filesystem.FileType {
	switch {
	case m.IsRegular():
		return filesystem.FileType_FILE_TYPE_FILE
	case m.IsDir():
		return filesystem.FileType_FILE_TYPE_DIRECTORY
	case m&fs.ModeSymlink != 0:
		return filesystem.FileType_FILE_TYPE_SYMLINK
	}
	return filesystem.FileType_FILE_TYPE_UNSPECIFIED
}

// entry describes fi as envd's EntryInfo: a symbolic link has its
// target's type and permission bits (when the target exists), its own
// mode string, and its target as an absolute path.
func (s *filesystemService) entry(ctx context.Context, id string, fi service.FileStat) *filesystem.EntryInfo {
	e := &filesystem.EntryInfo{
		Name: fi.Name, Type: entryType(fi.FullMode), Path: fi.Path, Size: fi.Size,
		Mode: uint32(fi.FullMode.Perm()), Permissions: fi.FullMode.String(),
		Owner: ownerName(fi.UID), Group: ownerName(fi.GID),
	}
	if !fi.ModTime.IsZero() {
		e.ModifiedTime = timestamppb.New(fi.ModTime)
	}
	if fi.Link != "" {
		target := linkTarget(fi)
		e.SymlinkTarget = &target
		e.Type, e.Mode = filesystem.FileType_FILE_TYPE_UNSPECIFIED, 0
		if t, err := s.files.Stat(ctx, id, target); err == nil {
			e.Type, e.Mode = entryType(t.FullMode), uint32(t.FullMode.Perm())
		}
	}
	return e
}

// linkTarget is the absolute path of the target of link fi.
func linkTarget(fi service.FileStat) string {
	if path.IsAbs(fi.Link) {
		return path.Clean(fi.Link)
	}
	return path.Join(path.Dir(fi.Path), fi.Link)
}

// stat is the EntryInfo of the file at p of sandbox id.
func (s *filesystemService) stat(ctx context.Context, id, p string) (*filesystem.EntryInfo, error) {
	fi, err := s.files.Stat(ctx, id, p)
	if err != nil {
		return nil, rpcError(err)
	}
	return s.entry(ctx, id, *fi), nil
}

// request checks an envd filesystem request's user and resolves its path.
func request(h http.Header, p string) (string, error) {
	if err := checkUser(h); err != nil {
		return "", err
	}
	resolved, err := resolvePath(p)
	if err != nil {
		return "", rpcError(err)
	}
	return resolved, nil
}

func (s *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	p, err := request(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := s.stat(ctx, sandboxOf(ctx), p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (s *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	p, err := request(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := max(int(req.Msg.GetDepth()), 1) // envd's default: the entries
	id := sandboxOf(ctx)
	fi, err := s.files.Stat(ctx, id, p)
	if err != nil {
		return nil, rpcError(err)
	}
	// As envd, a link to a directory lists the directory, under the
	// link's path.
	root := p
	if fi.Link != "" {
		root = linkTarget(*fi)
	}
	all, truncated, err := s.files.Walk(ctx, id, root, depth)
	if err == nil && truncated {
		// envd's answer has no room to say a list is cut.
		err = fmt.Errorf("more than %d entries under %s: list a smaller directory or depth: %w", service.MaxWalkEntries, p, errdefs.ErrResourceExhausted)
	}
	if err != nil {
		return nil, rpcError(err)
	}
	out := &filesystem.ListDirResponse{Entries: make([]*filesystem.EntryInfo, len(all))}
	for i, fi := range all {
		out.Entries[i] = s.entry(ctx, id, fi)
		out.Entries[i].Path = p + strings.TrimPrefix(fi.Path, root)
	}
	return connect.NewResponse(out), nil
}

func (s *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	p, err := request(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	id := sandboxOf(ctx)
	switch fi, err := s.files.Stat(ctx, id, p); {
	case err == nil && fi.IsDir:
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory already exists: %s", p))
	case err == nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path already exists but it is not a directory: %s", p))
	case !errors.Is(err, errdefs.ErrNotFound):
		return nil, rpcError(err)
	}
	if err := s.files.Mkdir(ctx, id, p); err != nil {
		return nil, rpcError(err)
	}
	e, err := s.stat(ctx, id, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: e}), nil
}

func (s *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	from, err := request(req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	to, err := resolvePath(req.Msg.GetDestination())
	if err != nil {
		return nil, rpcError(err)
	}
	id := sandboxOf(ctx)
	// As envd does, a missing source is not found before anything is
	// made, and the destination's directory is made when missing.
	if _, err := s.files.Stat(ctx, id, from); err != nil {
		return nil, rpcError(err)
	}
	if err := s.files.Mkdir(ctx, id, path.Dir(to)); err != nil {
		return nil, rpcError(err)
	}
	if err := s.files.Move(ctx, id, from, to); err != nil {
		return nil, rpcError(err)
	}
	e, err := s.stat(ctx, id, to)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: e}), nil
}

func (s *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	p, err := request(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	// As envd's os.RemoveAll: a directory with its contents, and a missing
	// path is no error.
	if err := s.files.Remove(ctx, sandboxOf(ctx), p, true); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// fsEvent is ev of watch w as envd's FilesystemEvent, with the entry,
// when asked, of a change that leaves one.
func (s *filesystemService) fsEvent(ctx context.Context, id string, w service.DirWatcher, ev service.FileEvent, withEntry bool) *filesystem.FilesystemEvent {
	out := &filesystem.FilesystemEvent{Name: ev.Name, Type: eventType(ev.Op)}
	switch ev.Op {
	case service.FileCreated, service.FileWritten, service.FileChmodded:
		if !withEntry {
			break
		}
		if fi, err := s.files.Stat(ctx, id, path.Join(w.Root(), ev.Name)); err == nil {
			out.Entry = s.entry(ctx, id, *fi)
		}
	}
	return out
}

// eventType is envd's EventType of op.
func eventType(op service.FileOp) filesystem.EventType {
	switch op {
	case service.FileCreated:
		return filesystem.EventType_EVENT_TYPE_CREATE
	case service.FileWritten:
		return filesystem.EventType_EVENT_TYPE_WRITE
	case service.FileRemoved:
		return filesystem.EventType_EVENT_TYPE_REMOVE
	case service.FileRenamed:
		return filesystem.EventType_EVENT_TYPE_RENAME
	case service.FileChmodded:
		return filesystem.EventType_EVENT_TYPE_CHMOD
	}
	return filesystem.EventType_EVENT_TYPE_UNSPECIFIED
}

func (s *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	p, err := request(req.Header(), req.Msg.GetPath())
	if err != nil {
		return err
	}
	id := sandboxOf(ctx)
	w, err := s.files.WatchDir(ctx, id, p, req.Msg.GetRecursive())
	if err != nil {
		return rpcError(err)
	}
	defer w.Close()
	if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	// The watch's events come from a goroutine of their own, which Close
	// ends.
	events, failed := make(chan service.FileEvent), make(chan error, 1)
	go func() {
		for {
			ev, err := w.Next()
			if err != nil {
				failed <- err
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	// A keepalive after the client's interval of silence.
	var quiet *time.Timer
	var quietC <-chan time.Time
	keepalive := keepaliveInterval(req.Header())
	if keepalive > 0 {
		quiet = time.NewTimer(keepalive)
		defer quiet.Stop()
		quietC = quiet.C
	}
	for {
		var out *filesystem.WatchDirResponse
		select {
		case <-ctx.Done():
			return rpcError(ctx.Err())
		case err := <-failed:
			return rpcError(err)
		case ev := <-events:
			out = &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{
				Filesystem: s.fsEvent(ctx, id, w, ev, req.Msg.GetIncludeEntry())}}
		case <-quietC:
			out = &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}
		}
		if err := stream.Send(out); err != nil {
			return err
		}
		if quiet != nil {
			quiet.Reset(keepalive)
		}
	}
}

func (s *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	p, err := request(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	id := sandboxOf(ctx)
	// The watch outlives this call: RemoveWatcher, or its being left
	// idle, ends it.
	wctx := context.WithoutCancel(ctx)
	w, err := s.files.WatchDir(wctx, id, p, req.Msg.GetRecursive())
	if err != nil {
		return nil, rpcError(err)
	}
	withEntry := req.Msg.GetIncludeEntry()
	wid, err := s.watches.add(id, w, func(ev service.FileEvent) *filesystem.FilesystemEvent {
		return s.fsEvent(wctx, id, w, ev, withEntry)
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: wid}), nil
}
func (s *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	events, err := s.watches.take(sandboxOf(ctx), req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: events}), nil
}

func (s *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	if err := s.watches.remove(sandboxOf(ctx), req.Msg.GetWatcherId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}
