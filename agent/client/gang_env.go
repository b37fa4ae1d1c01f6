package client

import (
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// schedulingEnv adds to env what the scheduler decided for the task beyond
// its devices:
//
//   - for a device memory share, GPULAYER_GPU_MEMORY_MB: the MiB of GPU
//     memory the task may use (the sum of its shares);
//   - for a gang member (structs.GangInfo), the variables
//     torch.distributed's env:// rendezvous reads: RANK, WORLD_SIZE,
//     LOCAL_RANK, MASTER_ADDR and MASTER_PORT, each also with a GPULAYER_
//     prefix, plus GPULAYER_GANG_PEERS (the members' node hosts in rank
//     order, comma-separated) and GPULAYER_GANG_ATTEMPT.
//
// They are set after the task's own env, so the scheduler's values win.
func schedulingEnv(env map[string]string, a *structs.Allocation, r *structs.AllocatedTaskResources) {
	if r != nil {
		var share int64
		for _, d := range r.Devices {
			if d != nil && d.MemoryMB > 0 {
				share += d.MemoryMB * int64(len(d.DeviceIDs))
			}
		}
		if share > 0 {
			env["GPULAYER_GPU_MEMORY_MB"] = strconv.FormatInt(share, 10)
		}
	}
	g := a.Gang
	if g == nil {
		return
	}
	set := func(k, v string) {
		env[k] = v
		env["GPULAYER_"+k] = v
	}
	set("RANK", strconv.Itoa(g.Rank))
	set("WORLD_SIZE", strconv.Itoa(g.WorldSize))
	set("LOCAL_RANK", strconv.Itoa(g.LocalRank))
	set("MASTER_ADDR", g.MasterAddr)
	set("MASTER_PORT", strconv.Itoa(g.MasterPort))
	env["GPULAYER_GANG_PEERS"] = strings.Join(g.Peers, ",")
	env["GPULAYER_GANG_ATTEMPT"] = strconv.Itoa(g.Attempt)
}
