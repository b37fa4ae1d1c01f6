package http

import "github.com/gpulayer/gpulayer/server"

// The handler finds its optional routes by type assertion on Config.Server
// (h.srv.(NodeServer) and the like), so a test fake need only implement the
// routes it exercises. That leaves a renamed method free to drop a route in
// silence; these assertions make the build fail instead when *server.Server
// stops implementing any of them. Every interface below is implemented by
// the real server; "optional" means only that a test fake may lack it, and
// the route then answers 501, is left unregistered, or the field is left
// out, as each call site says. TestOptionalInterfacesAsserted fails when a
// new assertion on h.srv or h.client has no line here (for the client: in
// FullClient below).
var (
	_ Server             = (*server.Server)(nil)
	_ ACLServer          = (*server.Server)(nil)
	_ ArtifactOpener     = (*server.Server)(nil)
	_ ArtifactServer     = (*server.Server)(nil)
	_ ChildrenServer     = (*server.Server)(nil)
	_ ClusterServer      = (*server.Server)(nil)
	_ DeploymentServer   = (*server.Server)(nil)
	_ EvalLister         = (*server.Server)(nil) // Nomad API compatibility (issue 12)
	_ GCServer           = (*server.Server)(nil)
	_ JobVersionServer   = (*server.Server)(nil)
	_ LastContacter      = (*server.Server)(nil)
	_ LogArchiveFinder   = (*server.Server)(nil)
	_ NodeServer         = (*server.Server)(nil)
	_ NodeChangesServer  = (*server.Server)(nil)
	_ GPUHeartbeatServer = (*server.Server)(nil) // node pools' GPU idleness (issue 16)
	_ ReadinessReporter  = (*server.Server)(nil)
	_ SchedulingServer   = (*server.Server)(nil)
	_ ServiceServer      = (*server.Server)(nil)
	_ StateHasher        = (*server.Server)(nil)
	_ TokenResolver      = (*server.Server)(nil)
	_ artifactReferencer = (*server.Server)(nil)
	_ drainServer        = (*server.Server)(nil)
	_ eventIndexer       = (*server.Server)(nil)
	_ eventSource        = (*server.Server)(nil)
	_ metricsCollector   = (*server.Server)(nil)
	_ nodeSecreter       = (*server.Server)(nil)
	_ raftMembers        = (*server.Server)(nil)
	// Endpoint aliases and the fleet view.
	_ EndpointServer = (*server.Server)(nil)
	// Node pools.
	_ NodePoolServer = (*server.Server)(nil)
	// Provisioning.
	_ NodePoolStatusServer = (*server.Server)(nil)
	_ poolsUIServer        = (*server.Server)(nil)
)

// FullClient is Client plus every optional interface the handler
// type-asserts on Config.Client (h.client.(allocActor) and the like), which
// test fakes may lack. *client.Client implements all of it: package agent,
// which links both, asserts so at compile time (agent/http does not import
// agent/client, whose drivers register job config validators).
type FullClient interface {
	Client
	allocActor
	allocNamespacer
	deviceStatser
	logTailer
	nodeSecretRotator
	checkStatuser
	endpointStatuser // endpoint routers (issue 14)
}
