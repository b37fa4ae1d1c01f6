package http

import (
	"errors"
	"net/http"

	"github.com/gpulayer/gpulayer/structs"
)

// uiLoginPage is what a UI page answers (403) to a browser without a token
// that may read it: a form that stores the token in localStorage (sent as
// X-Gpulayer-Token by the UI's API calls) and in the gpulayer-token cookie
// (path /ui, SameSite=Strict: read only by GET /ui/ pages), then reloads.
// It is static: nothing from the request is written into it.
const uiLoginPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>GPUlayer: token needed</title>
<link rel="stylesheet" href="/ui/static/style.css"></head>
<body data-login="1"><main>
<h1>GPUlayer</h1>
<p>This cluster checks ACL tokens. Paste a token's Secret ID (<code>gpulayer acl token create</code>, or the bootstrap token).</p>
<div id="token-dialog" class="dialog">
  <form data-action="save-token">
    <label for="token-input">ACL token</label>
    <input id="token-input" type="password" autocomplete="off" placeholder="secret ID">
    <button type="submit">Save</button>
    <button type="button" data-action="clear-token">Clear</button>
  </form>
</div>
<div id="flash" hidden></div>
</main><script src="/ui/static/app.js"></script></body></html>
`

// writeAuthError answers a request the ACL check refused: the login page
// for UI pages, the JSON error otherwise.
func (h *handler) writeAuthError(w http.ResponseWriter, r *http.Request, pattern string, err error) {
	if isUIPage(pattern) && errors.Is(err, structs.ErrPermissionDenied) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(uiLoginPage))
		return
	}
	h.writeError(w, r, err)
}
