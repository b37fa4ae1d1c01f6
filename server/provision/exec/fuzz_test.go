package exec

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/server/provision"
)

// FuzzDecodeOutput feeds arbitrary stdout to the decoder of each answer:
// it must never panic, and an answer it accepts must satisfy the
// protocol's bounds.
func FuzzDecodeOutput(f *testing.F) {
	for _, s := range []string{
		`{"id":"host-1","node_name":"n","state":"running"}`,
		`{"hosts":[{"id":"a","pool":"gpu","idempotency_key":"k","node_name":"n","state":"running"}]}`,
		`{}`, ``, `[1]`, `{"id":42}`, `{"hosts":[{"id":"a"},]}`, `{"id":"x"} {}`, "{\"id\":\"\\u0000\"}",
		`{"hosts":[{"id":"a"},{"id":"a"}]}`, `{"id":"` + strings.Repeat("x", 300) + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c CreateResponse
		if decodeObject(b, &c) == nil && c.validate(provision.CreateRequest{Pool: "gpu", IdempotencyKey: "k"}) == nil {
			if c.ID == "" || len(c.ID) > MaxIDLen || len(c.NodeName) > MaxNodeNameLen || hasControl(c.ID) {
				t.Fatalf("accepted a bad create answer: %+v", c)
			}
		}
		var l ListResponse
		if decodeObject(b, &l) == nil && l.validate() == nil {
			if len(l.Hosts) > MaxListHosts {
				t.Fatalf("accepted %d hosts", len(l.Hosts))
			}
			seen := map[string]bool{}
			for _, h := range l.Hosts {
				if h.ID == "" || seen[h.ID] || hasControl(h.ID) {
					t.Fatalf("accepted a bad host %+v", h)
				}
				seen[h.ID] = true
			}
		}
		var tr TerminateResponse
		_ = decodeObject(b, &tr)
	})
}
