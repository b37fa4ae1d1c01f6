// Package provision makes and removes the hosts of node pools with a
// scaling policy: the leader records provision requests in Raft (an
// outbox), and the executor here calls a Provider for each, outside every
// lock and never inside an FSM apply.
package provision

import (
	"context"
	"errors"

	"github.com/gpulayer/gpulayer/structs"
)

// ErrHostNotFound is returned by Provider.Terminate implementations that
// want to say the host was already gone; callers treat it as success.
var ErrHostNotFound = errors.New("provision: host not found")

// Host is one host a provider made.
type Host struct {
	// ID is the provider's ID of the host (a container ID, a cloud
	// instance ID).
	ID string
	// Pool and IdempotencyKey are the tags the host was created with, so
	// List after a leader failover can match hosts to requests.
	Pool           string
	IdempotencyKey string
	// NodeName is the node name the host's client registers as.
	NodeName string
	// State is the provider's word for the host ("running", "exited").
	State string
}

// CreateRequest asks a provider for one host.
type CreateRequest struct {
	Pool           string
	IdempotencyKey string
	NodeName       string
	Shape          structs.NodeShape
	// Config is the pool's ProviderConfig.
	Config map[string]string
	// Join is how the host's client reaches the cluster: server HTTP
	// addresses and the client token it registers with.
	Join JoinInfo
}

// JoinInfo is what a new host needs to join the cluster.
type JoinInfo struct {
	Servers []string // "host:port" HTTP addresses
	Token   string   // an ACL token (or node introduction secret); may be empty with ACLs off
	// Region and Datacenter the node registers in.
	Region     string
	Datacenter string
}

// Provider makes and removes hosts. Every method must honour ctx's
// deadline. Create is idempotent on IdempotencyKey: a second call with the
// same key returns the host the first made. Terminate of a host that is
// gone returns nil or ErrHostNotFound. List returns every host the provider
// tagged with pool (all pools when pool is empty). A cloud provider is a
// separate plugin later: an exec provider script, or a binary speaking the
// same JSON (see website/docs/provisioning.md).
type Provider interface {
	Name() string
	Create(ctx context.Context, req CreateRequest) (Host, error)
	Terminate(ctx context.Context, pool, hostID string) error
	List(ctx context.Context, pool string) ([]Host, error)
}
