package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/session"
)

// FileURITemplate names a file of a session's sandbox as a resource.
const FileURITemplate = "sandbox://{session}/files/{+path}"

func (s *Server) addResources() {
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "session-file", Title: "A file of a session", URITemplate: FileURITemplate,
		Description: "A file in a session's sandbox: sandbox://<session_id>/files/<absolute path without its first />, " +
			"such as sandbox://my-session/files/workspace/data.csv. Text when it is UTF-8, else binary. The session must exist.",
	}, s.readResource)
}

// readResource reads a file of an existing session (a read makes none).
func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	ctx = s.tenant(ctx, req.Extra)
	uri := req.Params.URI
	id, p, err := parseFileURI(uri)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	sb, err := s.sess.SessionSandbox(ctx, id)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	data, _, err := s.sess.ReadFile(ctx, session.Target{SandboxID: sb}, p, MaxFileBytes)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, resourceError(err)
	}
	rc := &mcp.ResourceContents{URI: uri, MIMEType: mime.TypeByExtension(path.Ext(p))}
	if utf8.Valid(data) {
		rc.Text = string(data)
		if rc.MIMEType == "" {
			rc.MIMEType = "text/plain"
		}
	} else {
		rc.Blob = data
		if rc.MIMEType == "" {
			rc.MIMEType = "application/octet-stream"
		}
	}
	if b, _ := json.Marshal(rc); len(b) > MaxResultText {
		return nil, resourceError(invalid("%s takes more of a result than the MCP server sends at once: read it with read_file, in parts (offset and length)", uri))
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{rc}}, nil
}

// resourceError is a failed read as a JSON-RPC error: invalid params when
// the URI names what cannot be read (a directory, a bad path, a file the
// sandbox's user may not read, one too large), internal otherwise.
func resourceError(err error) error {
	code := int64(jsonrpc.CodeInternalError)
	if status, _ := errdefs.HTTPStatus(err); status >= 400 && status < 500 {
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: err.Error()}
}

// parseFileURI splits sandbox://<session>/files/<path>, where <path> is
// the file's absolute path without its first '/'.
func parseFileURI(uri string) (id, p string, err error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", "", err
	}
	rest, ok := strings.CutPrefix(u.Path, "/files/")
	if u.Scheme != "sandbox" || u.Host == "" || !ok || rest == "" {
		return "", "", errdefs.Invalid("%s is not sandbox://<session>/files/<path>", uri)
	}
	return u.Host, "/" + rest, nil
}
