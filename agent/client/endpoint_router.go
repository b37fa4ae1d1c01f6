package client

import (
	"context"

	"github.com/gpulayer/gpulayer/agent/client/endpoint"
	"github.com/gpulayer/gpulayer/structs"
)

// routerAdapter is the endpointRouter of the manager over *endpoint.Router.
type routerAdapter struct{ r *endpoint.Router }

// newRouter is the manager's default router factory: an endpoint.Router
// with the package defaults (VerifyInterval 5 s) unless
// Config.EndpointVerifyInterval is set.
func newRouterFactory(cfg *Config) func(routerConfig) (endpointRouter, error) {
	return func(rc routerConfig) (endpointRouter, error) {
		r, err := endpoint.New(endpoint.Config{Endpoint: rc.Endpoint, ListenAddr: rc.ListenAddr, Logger: rc.Logger,
			OnStatus: rc.OnStatus, VerifyInterval: cfg.EndpointVerifyInterval})
		if err != nil {
			return nil, err
		}
		return routerAdapter{r}, nil
	}
}

func (a routerAdapter) Start(ctx context.Context) error { return a.r.Start(ctx) }
func (a routerAdapter) Addr() string                    { return a.r.Addr() }
func (a routerAdapter) Close() error                    { return a.r.Close() }
func (a routerAdapter) Unlisten() error                 { return a.r.Unlisten() }

func (a routerAdapter) SetMembers(ms []routerMember) {
	out := make([]endpoint.Member, len(ms))
	for i, m := range ms {
		out[i] = endpoint.Member{AllocID: m.AllocID, Index: m.Index, Addr: m.Addr, Identity: m.Identity, ChecksPassing: m.ChecksPassing}
	}
	a.r.SetMembers(out)
}

func (a routerAdapter) Status() *structs.ClientEndpointStatus {
	st := a.r.Status()
	out := &structs.ClientEndpointStatus{Endpoint: st.Endpoint, Model: st.Model, Policy: st.Policy, ListenAddr: st.ListenAddr,
		Admitted: st.Admitted, Requests: st.Requests, Failed: st.Failed, Rejected: st.Rejected, InFlight: st.InFlight}
	for _, m := range st.Members {
		mb := &structs.ClientEndpointMember{AllocID: m.AllocID, Index: m.Index, Addr: m.Addr, Admitted: m.Admitted, Reason: m.Reason,
			Identity: m.Identity, Outstanding: m.Outstanding, Served: m.Served, Failed: m.Failed}
		if !m.LastVerified.IsZero() {
			mb.LastVerified = m.LastVerified.UnixNano()
		}
		if !m.UpdatedAt.IsZero() {
			mb.UpdatedAt = m.UpdatedAt.UnixNano()
		}
		out.Members = append(out.Members, mb)
	}
	return out
}
