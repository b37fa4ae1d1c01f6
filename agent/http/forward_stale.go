package http

import (
	"net/http"
	"time"

	"github.com/gpulayer/gpulayer/server"
)

// LastContacter is implemented by servers that know how long ago they last
// heard from the leader; *server.Server does. With it, a ?stale read may
// bound its staleness with ?max_stale=D (Consul's max_stale): a server
// whose last leader contact is older than D forwards the read to the
// leader instead of answering it.
type LastContacter interface {
	// LastContact returns the time since the last contact with the leader:
	// zero on the leader, negative when there was none since start.
	LastContact() time.Duration
}

var _ LastContacter = (*server.Server)(nil)

// staleTooOld reports whether r is a ?stale read whose ?max_stale this
// server cannot meet. An invalid max_stale is left to parseQueryOptions,
// which answers 400.
func (h *handler) staleTooOld(r *http.Request) bool {
	s := r.URL.Query().Get("max_stale")
	if s == "" {
		return false
	}
	lc, ok := h.srv.(LastContacter)
	if !ok {
		return false
	}
	max, err := parseWait(s)
	if err != nil {
		return false
	}
	last := lc.LastContact()
	return last < 0 || last > max
}
