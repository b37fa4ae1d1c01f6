package structs

import (
	"hash/fnv"
	"net"
	"slices"
)

// Gang scheduling. A task group with Gang set and Count N is placed all at
// once or not at all: the scheduler puts all N allocations in one plan and
// the plan applier commits all of them or none. Each member's GangInfo
// gives its rank (the allocation's index), the world size (N), its rank
// among the members on the same node, and the address of every member's
// node, so the client can export RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR
// and MASTER_PORT as torch.distributed expects.
//
// When one member fails or is lost, the server stops the others and the
// scheduler places the whole gang again, with Attempt and Restarts one
// higher, at most GangMaxRestarts times; after that the group is left
// failed. Any other re-placement of the gang (an update, an evicted or
// stopped member) raises Attempt only.

// GangMaxRestarts is how many times a failed gang is placed again as a
// whole before the group is left failed.
const GangMaxRestarts = 3

// GangMasterPortBase is the first port a gang's MASTER_PORT is drawn from;
// 29500 is PyTorch's default MASTER_PORT. See GangMasterPort.
const GangMasterPortBase = 29500

// GangInfo is a gang member's place in its gang.
type GangInfo struct {
	// Rank is the member's rank, 0..WorldSize-1: its allocation index.
	Rank int
	// WorldSize is the number of members, the group's Count.
	WorldSize int
	// LocalRank is the member's rank among the members on its node,
	// counted in rank order from 0.
	LocalRank int
	// MasterAddr is the host of rank 0's node and MasterPort the TCP port
	// rank 0 listens on for the rendezvous.
	MasterAddr string
	MasterPort int
	// Peers holds each member's node host, indexed by rank.
	Peers []string
	// Attempt is 0 for the gang's first placement and counts every
	// placement of the whole gang since (restarts and updates).
	Attempt int
	// Restarts counts the placements caused by a member failing or being
	// lost; it is capped by GangMaxRestarts.
	Restarts int
}

// Copy returns a deep copy.
func (g *GangInfo) Copy() *GangInfo {
	if g == nil {
		return nil
	}
	n := *g
	n.Peers = slices.Clone(g.Peers)
	return &n
}

// GangMasterPort returns the MASTER_PORT of a job's gang group: a port in
// [GangMasterPortBase, GangMasterPortBase+1000) chosen by an FNV-1a hash of
// the job ID and group name, so it is the same on every member and for
// every attempt, and different gangs sharing a node rarely collide.
func GangMasterPort(jobID, group string) int {
	h := fnv.New32a()
	h.Write([]byte(jobID))
	h.Write([]byte{0})
	h.Write([]byte(group))
	return GangMasterPortBase + int(h.Sum32()%1000)
}

// NodeHost returns the host other nodes reach n at: the host part of its
// HTTPAddr, else its "unique.network.ip-address" attribute, else its name.
func NodeHost(n *Node) string {
	if n == nil {
		return ""
	}
	if n.HTTPAddr != "" {
		if host, _, err := net.SplitHostPort(n.HTTPAddr); err == nil && host != "" {
			return host
		}
	}
	if ip := n.Attributes["unique.network.ip-address"]; ip != "" {
		return ip
	}
	return n.Name
}

// IsGangGroup reports whether the job's group named group is a gang.
func (j *Job) IsGangGroup(group string) bool {
	tg := j.LookupTaskGroup(group)
	return tg != nil && tg.Gang
}
