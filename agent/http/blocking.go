package http

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// Blocking-query and token header names; the same as nomadish/api's.
const (
	headerIndex       = "X-Gpulayer-Index"
	headerKnownLeader = "X-Gpulayer-KnownLeader"
	headerLastContact = "X-Gpulayer-LastContact"

	// Nomad's names for the same three headers, sent as well so Nomad's
	// tools read them.
	headerNomadIndex       = "X-Nomad-Index"
	headerNomadKnownLeader = "X-Nomad-KnownLeader"
	headerNomadLastContact = "X-Nomad-LastContact"
)

// parseQueryOptions reads ?index=N (a Raft index), ?wait=D (a Go duration
// such as "30s"; a bare number is seconds), ?stale, ?max_stale=D (checked
// here, applied by forward_stale.go) and ?prefix. A bad value
// is a 400 error naming the parameter. The server caps the wait at
// structs.MaxBlockingQueryWait.
func parseQueryOptions(r *http.Request) (*structs.QueryOptions, error) {
	q := &structs.QueryOptions{}
	v := r.URL.Query()
	if s := v.Get("index"); s != "" {
		idx, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, badRequest("invalid index parameter %q: want a non-negative integer", s)
		}
		q.MinQueryIndex = idx
	}
	if s := v.Get("wait"); s != "" {
		d, err := parseWait(s)
		if err != nil {
			return nil, badRequest("invalid wait parameter %q: want a duration such as \"30s\"", s)
		}
		q.MaxQueryTime = d
	}
	stale, err := parseBool(r, "stale")
	if err != nil {
		return nil, err
	}
	q.AllowStale = stale
	if s := v.Get("max_stale"); s != "" {
		if _, err := parseWait(s); err != nil {
			return nil, badRequest("invalid max_stale parameter %q: want a duration such as \"5s\"", s)
		}
	}
	q.Prefix = v.Get("prefix")
	return q, nil
}

// parseWait reads a non-negative duration; a bare integer is seconds.
func parseWait(s string) (time.Duration, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, strconv.ErrRange
	}
	return d, nil
}

// setMeta writes the blocking-query headers: the data's Raft index, whether
// a leader is known, and the time since the last leader contact in
// milliseconds.
// The X-Nomad-* names carry the same values.
func setMeta(w http.ResponseWriter, m structs.QueryMeta) {
	idx := strconv.FormatUint(m.Index, 10)
	known := strconv.FormatBool(m.KnownLeader)
	last := strconv.FormatInt(m.LastContact.Milliseconds(), 10)
	h := w.Header()
	h.Set(headerIndex, idx)
	h.Set(headerNomadIndex, idx)
	h.Set(headerKnownLeader, known)
	h.Set(headerNomadKnownLeader, known)
	h.Set(headerLastContact, last)
	h.Set(headerNomadLastContact, last)
}

// setMetaOnError writes the blocking-query headers for a read that failed
// after it ran (a 404 for a missing object), so a client can block on the
// object's appearance; m without an index (the read never ran) writes
// nothing.
func setMetaOnError(w http.ResponseWriter, m structs.QueryMeta) {
	if m.Index > 0 {
		setMeta(w, m)
	}
}

// setIndex writes the Raft index of a write.
func setIndex(w http.ResponseWriter, index uint64) {
	idx := strconv.FormatUint(index, 10)
	w.Header().Set(headerIndex, idx)
	w.Header().Set(headerNomadIndex, idx)
}

// parseBool reads an optional boolean query parameter; absent is false.
func parseBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query()
	if !v.Has(name) {
		return false, nil
	}
	s := v.Get(name)
	if s == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badRequest("invalid %s parameter %q: want true or false", name, s)
	}
	return b, nil
}
