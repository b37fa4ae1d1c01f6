package client

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// applyNodeClass sets the node's class from the config and its devices:
// MemoryModel (the config's, else "unified" when a device group says its
// memory_model is unified, as an Apple Silicon GPU does, else
// "discrete"), Availability (default "continuous") and Reserved, and
// mirrors them in the attributes "memory_model", "availability" and
// "reserved" (comma-separated) for constraints and display. It returns an
// error naming the bad field for an unknown model, class or capability.
func (c *Client) applyNodeClass(n *structs.Node) error {
	if err := structs.ValidateNodeClass(c.cfg.MemoryModel, c.cfg.Availability, c.cfg.Reserved); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	n.MemoryModel = c.cfg.MemoryModel
	if n.MemoryModel == "" {
		n.MemoryModel = structs.MemoryModelDiscrete
		if n.NodeResources != nil {
			for _, g := range n.NodeResources.Devices {
				if a := g.Attributes["memory_model"]; a != nil && a.Text() == structs.MemoryModelUnified {
					n.MemoryModel = structs.MemoryModelUnified
				}
			}
		}
	}
	n.Availability = c.cfg.Availability
	if n.Availability == "" {
		n.Availability = structs.AvailabilityContinuous
	}
	n.Reserved = slices.Clone(c.cfg.Reserved)
	slices.Sort(n.Reserved)
	n.Reserved = slices.Compact(n.Reserved)
	n.Attributes["memory_model"] = n.MemoryModel
	n.Attributes["availability"] = n.Availability
	if len(n.Reserved) > 0 {
		n.Attributes["reserved"] = strings.Join(n.Reserved, ",")
	}
	return nil
}
