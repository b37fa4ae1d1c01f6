package agent

import (
	"github.com/gpulayer/gpulayer/agent/client"
	agenthttp "github.com/gpulayer/gpulayer/agent/http"
	"github.com/gpulayer/gpulayer/server"
)

// The HTTP handler finds its optional client routes by type assertion, so
// a renamed method would drop a route in silence: this fails the build
// instead. (The server's are asserted in agent/http/ifaces.go.)
var _ agenthttp.FullClient = (*client.Client)(nil)

// The client reads only what changed (client.AllocChangesConn) from the
// in-process server of a dev agent as from a remote one over HTTP.
var (
	_ client.ServerConn       = (*server.Server)(nil)
	_ client.AllocChangesConn = (*server.Server)(nil)
)
