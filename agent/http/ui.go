package http

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/gpulayer/gpulayer/website"
)

// The Web UI: server-rendered pages under /ui/ (templates in website/),
// refreshed live by website/static/app.js through /v1/event/stream. Every
// value a job provides goes through html/template's contextual escaping.

// deviceStatser is implemented by a client that samples its GPUs
// (*client.Client); the UI and /v1/metrics read its telemetry.
type deviceStatser interface {
	DeviceStats() *structs.NodeDeviceStats
}

// eventIndexer is implemented by a server whose event buffer can say the
// latest index it published; pages read it before their queries, so a
// stream from it misses no later change.
type eventIndexer interface {
	EventIndex() uint64
}

// ui renders the pages.
type ui struct {
	h     *handler
	pages map[string]*template.Template
	// now is the clock for relative times; tests may replace it.
	now func() time.Time
}

// uiFuncs are the template functions; none returns unescaped HTML.
var uiFuncs = template.FuncMap{
	"join":     strings.Join,
	"nanotime": fmtNanoTime,
	// pathesc escapes one path segment, so a child job's ID
	// ("<job>/periodic-<unix>") stays one segment of /ui/job/{id}.
	"pathesc": url.PathEscape,
	// plural picks the word for a count: {{plural n "node" "nodes"}}.
	"plural": plural,
	// pct clamps a percentage to 0..100 for a CSS width.
	"pct": func(v float64) string {
		if math.IsNaN(v) {
			v = 0
		}
		return fmt.Sprintf("%.1f", math.Max(0, math.Min(100, v)))
	},
}

// uiRoutes mounts the UI: GET / redirects to /ui/, /ui/ shows the jobs,
// and /ui/static/ serves the CSS and JavaScript. A client-only agent (no
// server) serves no UI.
func (h *handler) uiRoutes() error {
	pages, err := website.Templates(uiFuncs)
	if err != nil {
		return err
	}
	u := &ui{h: h, pages: pages, now: time.Now}
	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
	h.mux.HandleFunc("GET /ui/{$}", u.page(u.jobsPage))
	h.mux.HandleFunc("GET /ui/jobs", u.page(u.jobsPage))
	h.mux.HandleFunc("GET /ui/job/{id}", u.page(u.jobPage))
	h.mux.HandleFunc("GET /ui/allocation/{id}", u.page(u.allocPage))
	h.mux.HandleFunc("GET /ui/nodes", u.page(u.nodesPage))
	h.mux.HandleFunc("GET /ui/node/{id}", u.page(u.nodePage))
	h.mux.HandleFunc("GET /ui/servers", u.page(u.serversPage))
	h.mux.HandleFunc("GET /ui/run", u.page(u.runPage))
	// Endpoint aliases and the fleet view.
	h.mux.HandleFunc("GET /ui/endpoints", u.page(u.endpointsPage))
	// Provisioning (ui_pools.go).
	h.mux.HandleFunc("GET /ui/pools", u.page(u.poolsPage))
	static := http.StripPrefix("/ui/static/", http.FileServerFS(website.Static()))
	h.mux.Handle("GET /ui/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	}))
	h.mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		u.render(w, r, http.StatusNotFound, "error", &errorView{Code: http.StatusNotFound, Message: "No page at " + r.URL.Path})
	})
	return nil
}

// pageBase is what the layout needs from every page.
type pageBase struct {
	// Nav is the active section: jobs, nodes, pools, servers or run.
	Nav string
	// StreamIndex is the Raft index the page was rendered from; the page
	// streams events after it.
	StreamIndex uint64
	// StreamTopics are the event topics that make the page stale, e.g.
	// "Job:example"; none means a static page.
	StreamTopics []string
	// PollMillis, when positive, re-reads the page that often, for figures
	// no event announces (GPU telemetry, Raft statistics).
	PollMillis int
}

// base returns the layout data of a page.
func (p *pageBase) base() *pageBase { return p }

// pageData is implemented by every page's view.
type pageData interface{ base() *pageBase }

// pageFunc builds a page's view; it returns the template name.
type pageFunc func(r *http.Request) (string, pageData, error)

// page wraps a pageFunc: it reads the event index first, builds the view,
// and renders it, or an error page with the status errors map to.
func (u *ui) page(fn pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if u.h.srv == nil {
			u.render(w, r, http.StatusNotFound, "error", &errorView{Code: http.StatusNotFound, Message: "This agent runs no server: open the UI on a server agent."})
			return
		}
		var index uint64
		if ei, ok := u.h.srv.(eventIndexer); ok {
			index = ei.EventIndex()
		}
		name, view, err := fn(r)
		if err != nil {
			code := statusFor(err)
			u.render(w, r, code, "error", &errorView{Code: code, Message: err.Error()})
			return
		}
		view.base().StreamIndex = index
		u.render(w, r, http.StatusOK, name, view)
	}
}

// errorView is the error page.
type errorView struct {
	pageBase
	Code    int
	Message string
}

// render executes a page into a buffer first, so a template error becomes
// a clean 500 rather than half a page.
func (u *ui) render(w http.ResponseWriter, r *http.Request, code int, name string, view pageData) {
	var buf bytes.Buffer
	t := u.pages[name]
	if t == nil {
		err := fmt.Errorf("ui: no template %q", name)
		u.h.writeError(w, r, err)
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout", view); err != nil {
		u.h.logger.Error("render page", "page", name, "error", err)
		u.h.writeError(w, r, fmt.Errorf("render page %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Pages load only their own script and style: a job's text can never
	// run as script even if escaping were bypassed.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// hasRoute reports whether the API serves method on path, so pages offer
// only the actions this build supports (the allocation restart route, for
// instance).
func (h *handler) hasRoute(method, path string) bool {
	r, err := http.NewRequest(method, path, nil)
	if err != nil {
		return false
	}
	_, pattern := h.mux.Handler(r)
	return pattern != "" && !strings.HasPrefix(pattern, "GET /ui/")
}

// fmtNanoTime formats Unix nanoseconds as UTC to the second, "—" for zero.
func fmtNanoTime(ns int64) string {
	if ns == 0 {
		return "—"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05 UTC")
}

// shortID is the first 8 characters of an ID, as the CLI shows them.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
