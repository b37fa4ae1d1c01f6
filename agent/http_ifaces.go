package agent

import (
	"github.com/gpulayer/gpulayer/agent/client"
	agenthttp "github.com/gpulayer/gpulayer/agent/http"
)

// The HTTP handler finds its optional client routes by type assertion, so
// a renamed method would drop a route in silence: this fails the build
// instead. (The server's are asserted in agent/http/ifaces.go.)
var _ agenthttp.FullClient = (*client.Client)(nil)
