package e2b

// envd's Connect services (E2B's spec/envd/*.proto, generated into
// envdpb): how a request reaches them, which sandbox it is for, its user,
// its paths and its errors.

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"path"
	"strings"

	"connectrpc.com/connect"

	"github.com/agent2env/agent2env/internal/e2b/envdpb/filesystem/filesystemconnect"
	"github.com/agent2env/agent2env/internal/e2b/envdpb/process/processconnect"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// sandboxKey is the context key of the sandbox an envd request is for.
type sandboxKey struct{}

// withSandbox returns ctx for a request to sandbox id's envd.
func withSandbox(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, sandboxKey{}, id)
}

// sandboxOf returns the sandbox of an envd request's context; serveEnvd
// always sets it.
func sandboxOf(ctx context.Context) string {
	id, _ := ctx.Value(sandboxKey{}).(string)
	return id
}

// The largest request messages envd's services read (a larger one is
// Connect's resource_exhausted): a process's, whose stdin data may come in
// one message, and a file system call's, which is a few paths.
const (
	maxProcessMessage    = 16 << 20
	maxFilesystemMessage = 1 << 20
)

// isRPCPath reports whether p is a method of envd's Connect services.
func isRPCPath(p string) bool {
	return strings.HasPrefix(p, "/process.Process/") || strings.HasPrefix(p, "/filesystem.Filesystem/")
}

// rpcErrors answers errors met outside the Connect handlers in the
// protocol of the call (WriteError).
var rpcErrors = connect.NewErrorWriter()

// envdRPC returns the handler of envd's Connect services that cfg serves:
// those whose service is nil answer Connect's "unimplemented".
func envdRPC(cfg Config) http.Handler {
	mux := http.NewServeMux()
	if cfg.Procs != nil {
		mux.Handle(processconnect.NewProcessHandler(&processService{procs: cfg.Procs}, connect.WithReadMaxBytes(maxProcessMessage)))
	}
	if cfg.Files != nil {
		mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{files: cfg.Files, watches: newWatchers()}, connect.WithReadMaxBytes(maxFilesystemMessage)))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotImplemented, connectError{Code: connect.CodeUnimplemented.String(),
			Message: strings.TrimPrefix(r.URL.Path, "/") + " is not served by this daemon"})
	})
	return mux
}

// The users of an E2B sandbox. The SDKs name one in the Authorization
// header ("Basic " + base64("<name>:")) when the caller asks for it.
const (
	defaultUser = "user"
	rootUser    = "root"
)

// checkUser refuses a request for a user other than E2B's default one:
// every command and file operation of an agent2env sandbox is its user's
// (uid 1000), and nothing runs as root.
func checkUser(h http.Header) error {
	auth := h.Get("Authorization")
	if auth == "" {
		return nil
	}
	raw, ok := strings.CutPrefix(auth, "Basic ")
	if !ok {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("authorization: want Basic <base64 of user:>"))
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("authorization: the user is not base64"))
	}
	return userError(strings.TrimSuffix(string(b), ":"))
}

// userError says why user cannot be served; nil for E2B's default user.
func userError(user string) error {
	switch user {
	case defaultUser, "":
		return nil
	case rootUser:
		return connect.NewError(connect.CodePermissionDenied,
			errors.New("user root: agent2env runs every command and file operation as the sandbox's user, never as root"))
	}
	return connect.NewError(connect.CodeInvalidArgument,
		errors.New("user "+user+": an agent2env sandbox has one user, E2B's \"user\""))
}

// resolvePath returns the sandbox path an envd request names, as envd
// resolves it: "~" and relative paths from the user's home, an empty one
// the home itself, and ".." taken away lexically (filepath.Abs).
func resolvePath(p string) (string, error) {
	switch {
	case p == "" || p == "~":
		p = service.HomeDir
	case strings.HasPrefix(p, "~/"):
		p = service.HomeDir + p[1:]
	case !path.IsAbs(p):
		p = service.HomeDir + "/" + p
	}
	return service.CleanPath(path.Clean(p))
}

// rpcError is err as a Connect error: the class errdefs gives it, and
// the code of a context's end.
func rpcError(err error) error {
	var ce *connect.Error
	if err == nil || errors.As(err, &ce) {
		return err
	}
	code := connect.CodeInternal
	for _, c := range []struct {
		class error
		code  connect.Code
	}{
		{context.Canceled, connect.CodeCanceled},
		{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
		{errdefs.ErrInvalidArgument, connect.CodeInvalidArgument},
		{errdefs.ErrNotFound, connect.CodeNotFound},
		{errdefs.ErrAlreadyExists, connect.CodeAlreadyExists},
		{errdefs.ErrFailedPrecondition, connect.CodeFailedPrecondition},
		{errdefs.ErrResourceExhausted, connect.CodeResourceExhausted},
		{errdefs.ErrUnavailable, connect.CodeUnavailable},
		{errdefs.ErrDeadlineExceeded, connect.CodeDeadlineExceeded},
		{errdefs.ErrUnauthenticated, connect.CodeUnauthenticated},
		{errdefs.ErrPermissionDenied, connect.CodePermissionDenied},
		{errdefs.ErrNotImplemented, connect.CodeUnimplemented},
	} {
		if errors.Is(err, c.class) {
			code = c.code
			break
		}
	}
	return connect.NewError(code, err)
}
