package http

import (
	"net/http"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
)

// The pools page (/ui/pools): every node pool with a scaling policy, its
// nodes, pending provision requests, last decisions and failed provider
// calls (provisioning, issue 16). It polls: provision requests publish no
// events.

// uiPoolsPollMillis is how often the pools page re-reads itself.
const uiPoolsPollMillis = 2000

// poolsUIServer is what the pools page needs from the server.
type poolsUIServer interface {
	NodePoolServer
	NodePoolStatusServer
}

type poolsView struct {
	pageBase
	Pools []*structs.NodePoolStatus
	// Unscaled names the pools without a scaling policy.
	Unscaled []string
}

func (u *ui) poolsPage(r *http.Request) (string, pageData, error) {
	v := &poolsView{pageBase: pageBase{Nav: "pools", PollMillis: uiPoolsPollMillis}}
	ps, ok := u.h.srv.(poolsUIServer)
	if !ok {
		return "pools", v, nil
	}
	q := &structs.QueryOptions{AllowStale: true}
	pools, _, err := ps.NodePools(r.Context(), q)
	if err != nil {
		return "", nil, err
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	for _, p := range pools {
		if p.Scaling == nil {
			v.Unscaled = append(v.Unscaled, p.Name)
			continue
		}
		st, _, err := ps.NodePoolStatus(r.Context(), p.Name, q)
		if err != nil {
			return "", nil, err
		}
		v.Pools = append(v.Pools, waitingVisible(r, st))
	}
	return "pools", v, nil
}
