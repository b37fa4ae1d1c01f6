package fsm

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// Endpoint aliases (structs/endpoint_alias.go).
func init() {
	register(structs.EndpointAliasPromoteRequestType, (*FSM).applyEndpointAliasPromote)
	register(structs.EndpointAliasDeleteRequestType, (*FSM).applyEndpointAliasDelete)
}

// applyEndpointAliasPromote moves an alias in one transaction; who and
// when come in the message.
func (f *FSM) applyEndpointAliasPromote(index uint64, req *structs.EndpointAliasPromoteRequest) interface{} {
	if req.Alias == nil {
		return fmt.Errorf("%w: endpoint alias promote: Alias must be set", structs.ErrInvalid)
	}
	return errResp(f.State().PromoteEndpointAlias(index, req.Alias))
}

func (f *FSM) applyEndpointAliasDelete(index uint64, req *structs.EndpointAliasDeleteRequest) interface{} {
	return errResp(f.State().DeleteEndpointAlias(index, req.Namespace, req.Name))
}
