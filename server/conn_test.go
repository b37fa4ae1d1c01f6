package server_test

import (
	"github.com/gpulayer/gpulayer/agent/client"
	"github.com/gpulayer/gpulayer/server"
)

// The in-process server is the dev-mode client's connection.
var _ client.ServerConn = (*server.Server)(nil)

// It takes the GPU samples of heartbeats too (node pools' GPU idleness).
var _ client.GPUHeartbeater = (*server.Server)(nil)
