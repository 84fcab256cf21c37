package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/template"
)

// maxTemplateFile bounds an imported YAML file; the request around it may
// add multipart framing up to maxTemplateSlack.
const (
	maxTemplateFile  = 10 << 20
	maxTemplateSlack = 64 << 10
)

// yamlContentType is what LiteBoxd sends exported templates as.
const yamlContentType = "application/x-yaml"

// TemplateRoutes serves the template API (LiteBoxd's /api/v1/templates)
// over a template.Service.
type TemplateRoutes struct {
	svc *template.Service
}

var _ Routes = (*TemplateRoutes)(nil)

// NewTemplateRoutes returns the template routes of svc.
func NewTemplateRoutes(svc *template.Service) *TemplateRoutes { return &TemplateRoutes{svc: svc} }

// Register adds the routes to mux. The fixed paths /templates/import and
// /templates/export are more specific than /templates/{name}, so the mux
// prefers them whatever the order.
func (tr *TemplateRoutes) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/templates", tr.create)
	mux.HandleFunc("GET /api/v1/templates", tr.list)
	mux.HandleFunc("POST /api/v1/templates/import", tr.importYAML)
	mux.HandleFunc("GET /api/v1/templates/export", tr.exportAll)
	mux.HandleFunc("GET /api/v1/templates/{name}", tr.get)
	mux.HandleFunc("PUT /api/v1/templates/{name}", tr.update)
	mux.HandleFunc("DELETE /api/v1/templates/{name}", tr.delete)
	mux.HandleFunc("GET /api/v1/templates/{name}/versions", tr.versions)
	mux.HandleFunc("GET /api/v1/templates/{name}/versions/{version}", tr.version)
	mux.HandleFunc("POST /api/v1/templates/{name}/rollback", tr.rollback)
	mux.HandleFunc("GET /api/v1/templates/{name}/export", tr.exportOne)
}

func (tr *TemplateRoutes) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateTemplateRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	t, err := tr.svc.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

// atoi is LiteBoxd's reading of page numbers: anything but an integer is 0.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func (tr *TemplateRoutes) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	out, err := tr.svc.List(r.Context(), template.ListOptions{
		Tag: q.Get("tag"), Search: q.Get("search"), Page: atoi(q.Get("page")), PageSize: atoi(q.Get("pageSize")),
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (tr *TemplateRoutes) get(w http.ResponseWriter, r *http.Request) {
	t, err := tr.svc.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (tr *TemplateRoutes) update(w http.ResponseWriter, r *http.Request) {
	var req api.UpdateTemplateRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	t, err := tr.svc.Update(r.Context(), r.PathValue("name"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (tr *TemplateRoutes) delete(w http.ResponseWriter, r *http.Request) {
	if err := tr.svc.Delete(r.Context(), r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// versions lists a template's versions, newest first unless order=asc,
// a page of them with limit and cursor.
func (tr *TemplateRoutes) versions(w http.ResponseWriter, r *http.Request) {
	out, err := tr.versionPage(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// versionPage reads the page of versions r asks for: newest first by
// default, as LiteBoxd lists them.
func (tr *TemplateRoutes) versionPage(r *http.Request) (*api.VersionList, error) {
	opts, err := listOptions(r)
	if err != nil {
		return nil, err
	}
	p, err := service.NewestFirst(opts)
	if err != nil {
		return nil, err
	}
	return tr.svc.VersionPage(r.Context(), r.PathValue("name"), p)
}

func (tr *TemplateRoutes) version(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.PathValue("version"))
	if err != nil {
		writeError(w, errdefs.Invalid("Invalid version number"))
		return
	}
	v, err := tr.svc.Version(r.Context(), r.PathValue("name"), n)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (tr *TemplateRoutes) rollback(w http.ResponseWriter, r *http.Request) {
	var req api.RollbackRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	out, err := tr.svc.Rollback(r.Context(), r.PathValue("name"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func writeYAML(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", yamlContentType)
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

func (tr *TemplateRoutes) exportOne(w http.ResponseWriter, r *http.Request) {
	version := 0
	if v := r.URL.Query().Get("version"); v != "" {
		// LiteBoxd reads a leading integer ("2abc" is 2); <= 0 is the latest.
		if _, err := fmt.Sscanf(v, "%d", &version); err != nil {
			writeError(w, errdefs.Invalid("invalid version number"))
			return
		}
	}
	b, err := tr.svc.ExportYAML(r.Context(), r.PathValue("name"), version)
	if err != nil {
		writeError(w, err)
		return
	}
	writeYAML(w, b)
}

// exportAll takes names comma-separated, repeated, or both.
func (tr *TemplateRoutes) exportAll(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var names []string
	for _, v := range q["names"] {
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	b, err := tr.svc.ExportAll(r.Context(), q.Get("tag"), names)
	if err != nil {
		writeError(w, err)
		return
	}
	writeYAML(w, b)
}

// importYAML takes multipart/form-data (what the SDKs and the web UI
// send): the YAML in the file part "file", and the values "strategy"
// (default create-or-update) and "prepull" (a boolean). A urlencoded form
// with the YAML as the value "file" is accepted too, and strategy and
// prepull may also come in the query.
func (tr *TemplateRoutes) importYAML(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxTemplateFile+maxTemplateSlack)
	form, err := readImportForm(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if form.file == nil {
		writeError(w, errdefs.Invalid("file is required"))
		return
	}
	prepull := false
	if form.prepull != "" {
		if prepull, err = strconv.ParseBool(strings.TrimSpace(form.prepull)); err != nil {
			writeError(w, errdefs.Invalid("prepull %q is not a boolean", form.prepull))
			return
		}
	}
	res, err := tr.svc.Import(r.Context(), form.file, strings.TrimSpace(form.strategy), prepull)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

type importForm struct {
	file              []byte // nil: none given
	strategy, prepull string
	// inBody says the body gave strategy and prepull: of a value the
	// body repeats, the first counts.
	strategyInBody, prepullInBody bool
}

func readImportForm(r *http.Request) (*importForm, error) {
	q := r.URL.Query()
	form := &importForm{strategy: q.Get("strategy"), prepull: q.Get("prepull")}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, formErr(err)
		}
		if r.PostForm.Has("file") {
			form.file = []byte(r.PostForm.Get("file"))
		}
		form.override(r.PostForm.Has("strategy"), r.PostForm.Get("strategy"), r.PostForm.Has("prepull"), r.PostForm.Get("prepull"))
		if len(form.file) > maxTemplateFile {
			return nil, tooLarge()
		}
		return form, nil
	default:
		return nil, errdefs.Invalid("file is required: send multipart/form-data with the YAML in the file part \"file\"")
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, errdefs.Invalid("read multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return form, nil
		}
		if err != nil {
			return nil, formErr(err)
		}
		switch part.FormName() {
		case "file":
			if form.file != nil {
				return nil, errdefs.Invalid("more than one file part")
			}
			b, err := io.ReadAll(io.LimitReader(part, maxTemplateFile+1))
			if err != nil {
				return nil, formErr(err)
			}
			if len(b) > maxTemplateFile {
				return nil, tooLarge()
			}
			form.file = b
		case "strategy", "prepull":
			b, err := io.ReadAll(io.LimitReader(part, 257))
			if err != nil {
				return nil, formErr(err)
			}
			if len(b) > 256 {
				return nil, errdefs.Invalid("form value %s is too long", part.FormName())
			}
			isStrategy := part.FormName() == "strategy"
			form.override(isStrategy, string(b), !isStrategy, string(b))
		}
		part.Close()
	}
}

// override sets the values given in the body over those of the query;
// of a value the body repeats, the first counts, as LiteBoxd (and a
// urlencoded form's first value) takes it.
func (f *importForm) override(hasStrategy bool, strategy string, hasPrepull bool, prepull string) {
	if hasStrategy && !f.strategyInBody {
		f.strategy, f.strategyInBody = strategy, true
	}
	if hasPrepull && !f.prepullInBody {
		f.prepull, f.prepullInBody = prepull, true
	}
}

func tooLarge() error {
	return fmt.Errorf("template file is larger than %d MiB: %w", maxTemplateFile>>20, &http.MaxBytesError{Limit: maxTemplateFile})
}

// formErr classifies an error reading the form: a body over the limit, or
// a malformed one.
func formErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge()
	}
	return errdefs.Invalid("read form: %v", err)
}
