package structs

import "fmt"

// CheckWellFormed reports nil elements inside a node (a nil driver entry,
// device group or device instance) that decoded input can carry. It returns
// an error wrapping ErrInvalid that names the element, or nil.
func (n *Node) CheckWellFormed() error {
	for name, d := range n.Drivers {
		if d == nil {
			return fmt.Errorf("%w: node %q: driver %q is null", ErrInvalid, n.ID, name)
		}
	}
	if n.NodeResources == nil {
		return nil
	}
	for i, g := range n.NodeResources.Devices {
		if g == nil {
			return fmt.Errorf("%w: node %q: device group %d is null", ErrInvalid, n.ID, i)
		}
		for j, in := range g.Instances {
			if in == nil {
				return fmt.Errorf("%w: node %q: device group %q: instance %d is null", ErrInvalid, n.ID, g.ID(), j)
			}
		}
	}
	return nil
}

// CheckWellFormed reports nil elements inside an allocation's resources and
// task states. It returns an error wrapping ErrInvalid, or nil.
func (a *Allocation) CheckWellFormed() error {
	if a.AllocatedResources != nil {
		for task, tr := range a.AllocatedResources.Tasks {
			if tr == nil {
				return fmt.Errorf("%w: allocation %q: resources of task %q are null", ErrInvalid, a.ID, task)
			}
			for i, d := range tr.Devices {
				if d == nil {
					return fmt.Errorf("%w: allocation %q: task %q: device %d is null", ErrInvalid, a.ID, task, i)
				}
			}
		}
	}
	for task, ts := range a.TaskStates {
		if ts == nil {
			return fmt.Errorf("%w: allocation %q: state of task %q is null", ErrInvalid, a.ID, task)
		}
		for i, e := range ts.Events {
			if e == nil {
				return fmt.Errorf("%w: allocation %q: task %q: event %d is null", ErrInvalid, a.ID, task, i)
			}
		}
	}
	return nil
}
