// Package website is GPUlayer's Web UI: Go html/template pages, one CSS
// file and one plain JavaScript file, embedded in the binary with
// //go:embed. There is no front-end build. The agent's HTTP layer
// (agent/http/ui.go) gathers each page's data and executes the templates;
// html/template escapes everything a job provides (names, meta, task
// output), and the JavaScript only ever inserts text with textContent.
//
// The package imports the standard library only.
package website

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Pages lists the page templates; each is parsed together with
// templates/layout.html and templates/partials.html (blocks several pages
// share) and defines the blocks "title" and "main".
var Pages = []string{"jobs", "job", "alloc", "nodes", "node", "servers", "run", "error",
	// Endpoint aliases and the fleet view.
	"endpoints",
	// Provisioning.
	"pools"}

// Templates parses every page with the layout and funcs, returning one
// template per page name, executed by its "layout" template. It fails when
// a template does not parse, which the package's tests rule out.
func Templates(funcs template.FuncMap) (map[string]*template.Template, error) {
	out := make(map[string]*template.Template, len(Pages))
	for _, p := range Pages {
		t, err := template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("website: page %s: %w", p, err)
		}
		out[p] = t
	}
	return out, nil
}

// Static returns the static files (style.css, app.js) to serve under
// /ui/static/.
func Static() fs.FS {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		// "static" is embedded above, so Sub cannot fail.
		panic(err)
	}
	return sub
}
