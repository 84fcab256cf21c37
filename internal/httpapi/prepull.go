package httpapi

import (
	"net/http"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/prepull"
	"github.com/agent2env/agent2env/internal/service"
)

// PrepullRoutes serve the LiteBoxd prepull API on a prepull.Service, plus
// GET /images/prepull/{id}, which LiteBoxd's SDKs call but its server
// lacks.
type PrepullRoutes struct {
	svc *prepull.Service
}

var _ Routes = (*PrepullRoutes)(nil)

// NewPrepullRoutes returns the prepull routes of svc.
func NewPrepullRoutes(svc *prepull.Service) *PrepullRoutes { return &PrepullRoutes{svc: svc} }

// Register adds the routes to mux. /api/v1/images/prepull/{id} is more
// specific than the image removal route /api/v1/images/{ref...}, so the
// mux gives it precedence.
func (p *PrepullRoutes) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/images/prepull", p.create)
	mux.HandleFunc("GET /api/v1/images/prepull", p.list)
	mux.HandleFunc("GET /api/v1/images/prepull/{id}", p.get)
	mux.HandleFunc("DELETE /api/v1/images/prepull/{id}", p.delete)
	mux.HandleFunc("POST /api/v1/templates/{name}/prepull", p.forTemplate)
}

func (p *PrepullRoutes) create(w http.ResponseWriter, r *http.Request) {
	var req api.PrepullRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	task, err := p.svc.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, task)
}

// list lists the tasks of an image and status, newest first unless
// order=asc; with limit and cursor (agent2env additions), a page of them.
func (p *PrepullRoutes) list(w http.ResponseWriter, r *http.Request) {
	opts, err := listOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	page, err := service.NewestFirst(opts)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	tasks, err := p.svc.List(r.Context(), q.Get("image"), q.Get("status"))
	if err != nil {
		writeError(w, err)
		return
	}
	var out api.PrepullList
	out.Items, out.NextCursor, err = service.PageOf(tasks, page, func(t api.PrepullTask) (time.Time, string) { return t.StartedAt, t.ID })
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (p *PrepullRoutes) get(w http.ResponseWriter, r *http.Request) {
	task, err := p.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, task)
}

func (p *PrepullRoutes) delete(w http.ResponseWriter, r *http.Request) {
	if err := p.svc.Delete(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// forTemplate takes no body: whatever is sent is ignored, as by LiteBoxd.
func (p *PrepullRoutes) forTemplate(w http.ResponseWriter, r *http.Request) {
	task, err := p.svc.ForTemplate(r.Context(), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, task)
}
