package docker

import (
	"context"

	"github.com/gpulayer/gpulayer/server/provision"
)

// AgentConfig exposes agentConfig to the external tests, which parse its
// output with the agent's own parser.
var AgentConfig = agentConfig

// Libraries returns the image paths of what libraries(bin) adds.
func Libraries(bin string) ([]string, error) {
	files, err := libraries(bin)
	var paths []string
	for _, f := range files {
		paths = append(paths, f.path)
	}
	return paths, err
}

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
