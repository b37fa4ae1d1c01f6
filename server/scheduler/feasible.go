package scheduler

import (
	"fmt"
	"path"
	"slices"
	"sort"

	"github.com/gpulayer/gpulayer/structs"
)

// Reasons recorded in AllocMetric.ConstraintFiltered for feasibility checks
// that are not user constraints. User constraints are recorded by their
// String form, such as "${attr.kernel.name} = linux"; a node that is not
// Ready by structs.Node.NotReadyReason.
const (
	reasonDatacenter = "datacenter not in job"
)

// Descriptions set on allocations the scheduler stops.
const (
	descJobStopped    = "job stopped"
	descNotNeeded     = "alloc not needed due to job update"
	descUpdating      = "alloc is being updated due to job update"
	descQueuedBlocked = "created to place remaining allocations"
)

// deviceAsk is one device request of one task of a group.
type deviceAsk struct {
	task string
	req  *structs.RequestedDevice
	// vendor, typ and name are req.Name parsed once; bad is set when it
	// does not parse, and then no device group matches.
	vendor, typ, name string
	bad               bool
	// weight is the sum of the absolute weights of the request's
	// affinities, used to normalise the affinity score.
	weight float64
	// share is the memory share asked for, in MiB; 0 for whole devices.
	share int64
}

// groupAsk is everything a task group asks of a node, gathered once per
// group: CPU in MHz and memory in MiB summed over tasks, the drivers, all
// job, group and task constraints and affinities, and the device requests
// in task order.
type groupAsk struct {
	tg          *structs.TaskGroup
	cpu, mem    int64
	drivers     []string
	constraints []*structs.Constraint
	affinities  []*structs.Affinity
	devices     []deviceAsk
	// instances is the total number of device instances asked for.
	instances int
	// affinityWeight is the sum of the absolute weights of every node and
	// device affinity; zero when there are none.
	affinityWeight float64
	// shareMiB is the sum of the device memory shares asked for, in MiB;
	// on a unified-memory node it is charged to host memory.
	shareMiB int64
	// requires and avail are the group's node class demands (see
	// structs.NodeTakesGroup).
	requires []string
	avail    string
	// ports are the group's host ports (ports.go).
	ports portAsk
	// promoted is the reason opportunistic nodes are refused for a group
	// whose endpoint carries a promoted alias ("" when none; endpoint.go).
	promoted string
}

func newGroupAsk(job *structs.Job, tg *structs.TaskGroup) *groupAsk {
	a := &groupAsk{tg: tg, requires: structs.GroupRequires(job, tg), avail: structs.GroupAvailability(job, tg), ports: newPortAsk(tg)}
	a.constraints = append(a.constraints, job.Constraints...)
	a.constraints = append(a.constraints, tg.Constraints...)
	a.affinities = append(a.affinities, job.Affinities...)
	a.affinities = append(a.affinities, tg.Affinities...)
	for _, t := range tg.Tasks {
		if t == nil {
			continue
		}
		if t.Driver != "" && !slices.Contains(a.drivers, t.Driver) {
			a.drivers = append(a.drivers, t.Driver)
		}
		a.constraints = append(a.constraints, t.Constraints...)
		a.affinities = append(a.affinities, t.Affinities...)
		if t.Resources == nil {
			continue
		}
		a.cpu += int64(t.Resources.CPU)
		a.mem += int64(t.Resources.MemoryMB)
		for _, d := range t.Resources.Devices {
			if d == nil || d.Count <= 0 {
				continue
			}
			da := deviceAsk{task: t.Name, req: d, share: int64(d.MemoryMB)}
			var err error
			da.vendor, da.typ, da.name, err = structs.ParseDeviceName(d.Name)
			da.bad = err != nil
			for _, af := range d.Affinities {
				if af != nil {
					da.weight += abs(float64(af.Weight))
				}
			}
			a.devices = append(a.devices, da)
			if da.share > 0 {
				a.shareMiB += da.share
			} else {
				a.instances += d.Count
			}
			a.affinityWeight += da.weight
		}
	}
	sort.Strings(a.drivers)
	for _, af := range a.affinities {
		if af != nil {
			a.affinityWeight += abs(float64(af.Weight))
		}
	}
	return a
}

// matches reports whether device group g can serve the request by name,
// as structs.DeviceGroup.Matches does, without parsing the name again.
func (da *deviceAsk) matches(g *structs.DeviceGroup) bool {
	return !da.bad && g.Type == da.typ && (da.vendor == "" || da.vendor == g.Vendor) && (da.name == "" || da.name == g.Name)
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// devChoice is a node device group that can serve a device request, with
// the sum of the weights of the request's affinities it matches.
type devChoice struct {
	group    int
	affinity float64
}

// candidate is a node that passed feasibility for one group.
type candidate struct {
	node *structs.Node
	// affinity is the sum of the weights of the node affinities it matches.
	affinity float64
	// choices lists, per groupAsk.devices entry, the node's device groups
	// that match the request's name and constraints and have a healthy
	// instance (and, for a memory share, the memory), best affinity first,
	// then in node order; together they have the request's Count healthy
	// instances.
	choices [][]devChoice
}

// feasibility checks node n for the group, in this order: ready, datacenter,
// node class (availability and reserved capabilities), drivers,
// constraints, devices, node pool. It returns the candidate, or the reason
// the node was filtered out. The node pool comes last so a blocked group
// still reports what the nodes of other pools lack (the devices a new node
// of its pool must have).
func (c *evalCtx) feasibility(job *structs.Job, ask *groupAsk, n *structs.Node) (*candidate, string) {
	if !n.Ready() {
		return nil, n.NotReadyReason()
	}
	if !datacenterAllowed(job.Datacenters, n.Datacenter) {
		return nil, reasonDatacenter
	}
	if ok, reason := structs.NodeTakesGroup(n, ask.requires, ask.avail); !ok {
		return nil, reason
	}
	for _, d := range ask.drivers {
		if !driverHealthy(n, d) {
			return nil, fmt.Sprintf("missing driver %q", d)
		}
	}
	for _, con := range ask.constraints {
		if con == nil {
			continue
		}
		if !checkOperand(con.Operand, resolveNode(n, con.LTarget), resolveNode(n, con.RTarget), c.rx) {
			return nil, con.String()
		}
	}
	// Endpoint aliases: a promoted endpoint never runs on an
	// opportunistic node.
	if ask.promoted != "" && n.IsOpportunistic() {
		return nil, ask.promoted
	}
	cand := &candidate{node: n}
	for _, af := range ask.affinities {
		if af != nil && checkOperand(af.Operand, resolveNode(n, af.LTarget), resolveNode(n, af.RTarget), c.rx) {
			cand.affinity += float64(af.Weight)
		}
	}
	if len(ask.devices) > 0 {
		var groups []*structs.DeviceGroup
		if n.NodeResources != nil {
			groups = n.NodeResources.Devices
		}
		start, choicesStart := len(c.choiceLists), len(c.choices)
		for i := range ask.devices {
			da := &ask.devices[i]
			first := len(c.choices)
			healthy := 0
			for gi, g := range groups {
				if g == nil || !da.matches(g) {
					continue
				}
				h := healthyCount(g)
				if h == 0 || (da.share > 0 && g.MemoryMiB() < da.share) {
					continue
				}
				if !c.deviceConstraintsHold(n, g, da.req) {
					continue
				}
				var aff float64
				for _, af := range da.req.Affinities {
					if af != nil && checkOperand(af.Operand, resolveDevice(n, g, af.LTarget), resolveDevice(n, g, af.RTarget), c.rx) {
						aff += float64(af.Weight)
					}
				}
				c.choices = append(c.choices, devChoice{group: gi, affinity: aff})
				healthy += h
			}
			// A whole request may span the device groups that serve it
			// (see pickDevices), so their healthy instances add up.
			if len(c.choices) == first || (da.share == 0 && healthy < da.req.Count) {
				c.choices = c.choices[:first]
				c.choiceLists = c.choiceLists[:start]
				return nil, "missing devices: " + da.req.Name
			}
			list := c.choices[first:len(c.choices):len(c.choices)]
			sort.SliceStable(list, func(a, b int) bool { return list[a].affinity > list[b].affinity })
			c.choiceLists = append(c.choiceLists, list)
		}
		cand.choices = c.choiceLists[start:len(c.choiceLists):len(c.choiceLists)]
		if reason := nodePoolReason(job, n); reason != "" {
			c.choices = c.choices[:choicesStart]
			c.choiceLists = c.choiceLists[:start]
			return nil, reason
		}
		return cand, ""
	}
	if reason := nodePoolReason(job, n); reason != "" {
		return nil, reason
	}
	return cand, ""
}

func healthyCount(g *structs.DeviceGroup) int {
	n := 0
	for _, in := range g.Instances {
		if in != nil && in.Healthy {
			n++
		}
	}
	return n
}

func (c *evalCtx) deviceConstraintsHold(n *structs.Node, g *structs.DeviceGroup, req *structs.RequestedDevice) bool {
	for _, con := range req.Constraints {
		if con == nil {
			continue
		}
		if !checkOperand(con.Operand, resolveDevice(n, g, con.LTarget), resolveDevice(n, g, con.RTarget), c.rx) {
			return false
		}
	}
	return true
}

// datacenterAllowed reports whether dc matches one of the job's
// datacenters; entries may be glob patterns such as "us-*". An empty list
// allows every datacenter.
func datacenterAllowed(dcs []string, dc string) bool {
	if len(dcs) == 0 {
		return true
	}
	for _, want := range dcs {
		if want == dc {
			return true
		}
		if ok, err := path.Match(want, dc); err == nil && ok {
			return true
		}
	}
	return false
}

// driverHealthy reports whether the node has driver d and it is healthy.
// A node that reports no DriverInfo for d may still advertise it with the
// attribute "driver.<d>" = "1" or "true", as Nomad's older fingerprints do.
func driverHealthy(n *structs.Node, d string) bool {
	if info, ok := n.Drivers[d]; ok && info != nil {
		return info.Healthy
	}
	switch n.Attributes["driver."+d] {
	case "1", "true":
		return true
	}
	return false
}

// nodePoolReason returns "" when node n is in the job's node pool (any
// node for "all"; an empty pool is "default" on both sides), else the
// reason it is filtered out: "node pool: node in pool X, job wants Y".
func nodePoolReason(job *structs.Job, n *structs.Node) string {
	want := structs.NodePoolOrDefault(job.NodePool)
	if want == structs.NodePoolAll {
		return ""
	}
	have := structs.NodePoolOrDefault(n.NodePool)
	if have == want {
		return ""
	}
	return "node pool: node in pool " + have + ", job wants " + want
}
