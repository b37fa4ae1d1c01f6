package command

import (
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// TestAllocStatusEndpointLine: an endpoint member's allocation shows
// whether the router admits it and, when not, the reason; an allocation
// without an endpoint shows no such line.
func TestAllocStatusEndpointLine(t *testing.T) {
	m := &Meta{Location: time.UTC}
	cases := []struct {
		name string
		em   *api.AllocEndpointMember
		want []string
		not  []string
	}{
		{"none", nil, nil, []string{"Endpoint"}},
		{"admitted", &api.AllocEndpointMember{Admitted: true, JobVersion: 2, ArtifactDigest: "sha256:0123456789abcdef0123", ConfigDigest: "fedcba9876543210"},
			[]string{"Endpoint            = admitted", "job version 2, artifact 0123456789ab, config fedcba987654"}, []string{"not admitted"}},
		{"refused", &api.AllocEndpointMember{Reason: `model "llm-70b" not listed by /v1/models`},
			[]string{`Endpoint            = not admitted: model "llm-70b" not listed by /v1/models`, "artifact -, config -"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := m.formatAlloc(&api.Allocation{ID: "a1", ClientStatus: "running", EndpointMember: tc.em})
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output holds %q:\n%s", n, out)
				}
			}
		})
	}
}
