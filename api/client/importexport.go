package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/agent2env/agent2env/api"
)

// ImportExportService holds the endpoints that move templates as LiteBoxd
// YAML (apiVersion liteboxd/v1). Use it as Client.ImportExport.
type ImportExportService struct {
	c *Client
}

// ImportTemplates creates or updates the templates of the YAML read from
// r: a SandboxTemplate, a SandboxTemplateList, or a "---" stream of them.
// strategy is one of api.Strategy*; "" means create-or-update. With
// prepull the daemon also starts prepulling the images of the templates it
// created or updated. The YAML is streamed to the daemon as the file part
// "file" of a multipart form.
//
// Each template succeeds or fails alone: a result with Failed > 0 is not
// an error. The error is for an import refused whole, such as YAML that
// does not parse (ErrBadRequest, code INVALID_YAML).
func (s *ImportExportService) ImportTemplates(ctx context.Context, r io.Reader, strategy string, prepull bool) (*api.ImportResult, error) {
	if r == nil {
		return nil, invalidf("import templates: no YAML to read")
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeImport(mw, r, strategy, prepull))
	}()
	resp, err := s.c.send(ctx, http.MethodPost, apiPrefix+"/templates/import", nil, pr, mw.FormDataContentType())
	// Stop the copy if the request ended before reading all of it.
	pr.CloseWithError(errors.New("import request finished"))
	if err != nil {
		return nil, wrapf(err, "import templates")
	}
	defer resp.Body.Close()
	var res api.ImportResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, wrapf(err, "import templates: decode response")
	}
	return &res, nil
}

// writeImport writes the multipart body of an import: the values first,
// then the YAML as a file part named as LiteBoxd's SDKs name it.
func writeImport(mw *multipart.Writer, r io.Reader, strategy string, prepull bool) error {
	if strategy != "" {
		if err := mw.WriteField("strategy", strategy); err != nil {
			return err
		}
	}
	if prepull {
		if err := mw.WriteField("prepull", "true"); err != nil {
			return err
		}
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="templates.yaml"`)
	h.Set("Content-Type", "application/x-yaml")
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, r); err != nil {
		return wrapf(err, "read templates")
	}
	return mw.Close()
}

// ExportAll returns the templates carrying tag and named in names (either
// empty for all) as one SandboxTemplateList YAML document, each with its
// latest spec.
func (s *ImportExportService) ExportAll(ctx context.Context, tag string, names []string) ([]byte, error) {
	q := url.Values{}
	if tag != "" {
		q.Set("tag", tag)
	}
	if len(names) > 0 {
		// One comma-separated value: LiteBoxd reads only the first of
		// repeated values, agent2env takes either form.
		q.Set("names", strings.Join(names, ","))
	}
	b, err := s.c.getBytes(ctx, "/templates/export", q)
	if err != nil {
		return nil, wrapf(err, "export templates")
	}
	return b, nil
}
