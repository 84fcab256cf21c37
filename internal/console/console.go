// Package console serves the web console: the single-page app built from
// web/ by make web, committed under dist and embedded, so that go build
// needs no Node.js.
//
// The console has an origin of its own (serve --console-listen), never the
// API's, where the port gateway serves sandboxes' own pages: a page there
// could read what the console keeps in its tab. The app calls the API
// across origins with the key as Authorization (the API allows exactly
// this origin, httpapi.CORS); nothing is kept in cookies. Every answer
// carries a strict Content-Security-Policy.
//
// A Handler is safe for concurrent use.
package console

import (
	"bytes"
	"embed"
	"fmt"
	"html"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

//go:embed all:dist
var dist embed.FS

// apiMeta is the element of the built index.html whose content the server
// fills with the API's origin, which the app reads at start (no inline
// script, no request of its own).
const apiMeta = `<meta name="agent2env-api" content="">`

// reservedPrefix starts the paths the console never answers with its app:
// the API's and the port gateway's, which live on the API's origin only.
const reservedPrefix = "/api/"

// assetsPrefix starts the paths of the built files named by their content.
const assetsPrefix = "/assets/"

// Config is what a console Handler needs.
type Config struct {
	// APIOrigin is the API's origin (http://127.0.0.1:8080), which the app
	// calls and the Content-Security-Policy lets it connect to.
	APIOrigin string
}

// Handler serves the embedded app: its files under /assets/ (named by
// their content's hash: cached for good), and index.html for every path
// of the app's own, where it routes itself (not cached): one without an
// extension, or one below the top that is not under /assets/ (a session's
// page, /sessions/my.session: the API allows dots in its ids). Paths
// under /api/, files missing under /assets/ and missing files at the top
// (/favicon.ico) are 404; methods other than GET and HEAD are 405. It fails on a malformed APIOrigin or an embedded
// build without index.html.
func Handler(cfg Config) (http.Handler, error) {
	api, err := url.Parse(cfg.APIOrigin)
	if err != nil || (api.Scheme != "http" && api.Scheme != "https") || api.Host == "" || api.Path != "" {
		return nil, fmt.Errorf("console: API origin %q: want scheme://host[:port]", cfg.APIOrigin)
	}
	files, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		return nil, fmt.Errorf("console: the embedded build has no index.html (run make web): %w", err)
	}
	if !bytes.Contains(index, []byte(apiMeta)) {
		return nil, fmt.Errorf("console: the embedded index.html lacks %s (run make web)", apiMeta)
	}
	origin := api.Scheme + "://" + api.Host
	index = bytes.Replace(index, []byte(apiMeta),
		[]byte(`<meta name="agent2env-api" content="`+html.EscapeString(origin)+`">`), 1)
	ws := "ws://" + api.Host
	if api.Scheme == "https" {
		ws = "wss://" + api.Host
	}
	return &handler{files: files, index: index, csp: policy(origin, ws)}, nil
}

// policy is the Content-Security-Policy of every answer. Scripts come only
// from the console's own files; styles may also be inline, because the
// terminal (xterm.js) writes its theme into a <style> element.
func policy(apiOrigin, wsOrigin string) string {
	return strings.Join([]string{
		"default-src 'self'",
		"script-src 'self'",
		"style-src 'self' 'unsafe-inline'",
		"img-src 'self' data:",
		"connect-src 'self' " + apiOrigin + " " + wsOrigin,
		"object-src 'none'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

type handler struct {
	files fs.FS
	index []byte // index.html with the API's origin filled in
	csp   string
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "the console only serves files: use GET", http.StatusMethodNotAllowed)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	switch {
	case strings.HasPrefix(p+"/", reservedPrefix):
		http.Error(w, "not found: the console serves no API; call the API on its own address", http.StatusNotFound)
	case p == "/index.html" || appRoute(p):
		hd.Set("Cache-Control", "no-cache")
		hd.Set("Content-Type", "text/html; charset=utf-8")
		http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(h.index))
	default:
		h.serveFile(w, r, strings.TrimPrefix(p, "/"))
	}
}

// appRoute tells whether the clean path p is one of the app's pages rather
// than a file: it has no extension, or it is below the top and not under
// /assets/, where the built files are.
func appRoute(p string) bool {
	return path.Ext(p) == "" || strings.Count(p, "/") > 1 && !strings.HasPrefix(p, assetsPrefix)
}

// serveFile answers with the built file name, or 404.
func (h *handler) serveFile(w http.ResponseWriter, r *http.Request, name string) {
	b, err := fs.ReadFile(h.files, name)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if strings.HasPrefix("/"+name, assetsPrefix) {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
