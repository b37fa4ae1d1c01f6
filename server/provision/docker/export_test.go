package docker

import (
	"context"

	"github.com/gpulayer/gpulayer/server/provision"
)

// AgentConfig exposes agentConfig to the external tests, which parse its
// output with the agent's own parser.
var AgentConfig = agentConfig

// CheckStatic exposes checkStatic.
var CheckStatic = checkStatic

// DynamicPortWindow exposes dynamicPortWindow.
var DynamicPortWindow = dynamicPortWindow

// CreateOnly makes the container of req without starting it or writing
// its config: what a call interrupted after ContainerCreate leaves.
func (p *Provider) CreateOnly(ctx context.Context, req provision.CreateRequest) (string, error) {
	s, err := ParseSettings(req.Config)
	if err != nil {
		return "", err
	}
	image, err := p.ensureImage(ctx, s)
	if err != nil {
		return "", err
	}
	id, _, err := p.createContainer(ctx, req, s, image)
	return id, err
}

// CheckRequest exposes checkRequest.
var CheckRequest = checkRequest
