package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/gpulayer/gpulayer/agent/driver"
)

var _ driver.GoneProver = (*Driver)(nil)

// TaskGone implements driver.GoneProver: it returns nil when the daemon no
// longer knows the task's container (DestroyTask removes it), and an error
// naming the container and its state otherwise, or the daemon's error.
func (d *Driver) TaskGone(h *driver.TaskHandle) error {
	if h == nil || h.ContainerID == "" {
		return fmt.Errorf("handle without a container ID: cannot prove the task is gone")
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultAPITimeout)
	defer cancel()
	ins, err := d.api.ContainerInspect(ctx, h.ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("inspect container %s: %w", shortID(h.ContainerID), err)
	}
	state := "unknown"
	if ins.Container.State != nil {
		state = string(ins.Container.State.Status)
	}
	return fmt.Errorf("container %s still exists (%s)", shortID(h.ContainerID), state)
}
