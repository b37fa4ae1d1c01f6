package client

import (
	"net"
	"strconv"

	"github.com/gpulayer/gpulayer/structs"
)

// portEnv adds, for each host port the plan gave the allocation, Nomad's
// variables and their GPULAYER_ twins:
//
//	NOMAD_PORT_<label>       the port the task binds: the host port for a
//	                         native task, the mapped "to" port for docker
//	NOMAD_HOST_PORT_<label>  the host port
//	NOMAD_IP_<label>, NOMAD_HOST_IP_<label>     the host address
//	NOMAD_ADDR_<label>, NOMAD_HOST_ADDR_<label> host address:host port
func portEnv(env map[string]string, a *structs.Allocation, driverName string) {
	if a.AllocatedResources == nil || a.AllocatedResources.Shared == nil {
		return
	}
	for _, p := range a.AllocatedResources.Shared.Ports {
		bind := p.Value
		if driverName == "docker" && p.To > 0 {
			bind = p.To
		}
		addr := net.JoinHostPort(p.HostIP, strconv.Itoa(p.Value))
		for _, pre := range []string{"NOMAD_", "GPULAYER_"} {
			env[pre+"PORT_"+p.Label] = strconv.Itoa(bind)
			env[pre+"HOST_PORT_"+p.Label] = strconv.Itoa(p.Value)
			env[pre+"IP_"+p.Label] = p.HostIP
			env[pre+"HOST_IP_"+p.Label] = p.HostIP
			env[pre+"ADDR_"+p.Label] = addr
			env[pre+"HOST_ADDR_"+p.Label] = addr
		}
	}
}
