package scheduler

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// promotedReason returns the reason an opportunistic node is refused for
// group tg of job: its endpoint carries a promoted alias ("endpoint
// llm-70b is promoted (alias llm.primary): opportunistic nodes
// excluded"), or "" when the group has no endpoint or no alias is
// promoted onto it. When the aliases cannot be read the group is treated
// as promoted (fail closed): a promoted endpoint must never land on an
// opportunistic node.
func promotedReason(st State, job *structs.Job, tg *structs.TaskGroup) string {
	if tg == nil || tg.Endpoint == nil || tg.Endpoint.Name == "" {
		return ""
	}
	aliases, err := st.EndpointAliasesByEndpoint(job.Namespace, tg.Endpoint.Name)
	if err != nil {
		return fmt.Sprintf("endpoint %s promotion unknown (%v): opportunistic nodes excluded", tg.Endpoint.Name, err)
	}
	if len(aliases) == 0 {
		return ""
	}
	return fmt.Sprintf("endpoint %s is promoted (alias %s): opportunistic nodes excluded", tg.Endpoint.Name, aliases[0].Name)
}
