package command

import (
	"fmt"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// gpuHolders maps each device instance to the short ID of the allocation
// holding it (several, comma-separated, when memory shares split it).
func gpuHolders(allocs []*api.Allocation) map[string]string {
	holder := map[string]string{}
	for _, a := range allocs {
		if a.ClientTerminalStatus() || a.AllocatedResources == nil {
			continue
		}
		for _, tr := range a.AllocatedResources.Tasks {
			for _, did := range tr.DeviceIDs() {
				if holder[did] != "" {
					holder[did] += ","
				}
				holder[did] += shortID(a.ID)
			}
		}
	}
	return holder
}

// localTelemetry returns the agent's own client telemetry by device ID
// when that client is nodeID, else nil (telemetry of other nodes is not
// proxied yet).
func (m *Meta) localTelemetry(client *api.Client, nodeID string) map[string]*api.DeviceStats {
	st, err := client.ClientStats(nil)
	if err != nil || st == nil || st.NodeID != nodeID || st.SampledAt == 0 {
		return nil
	}
	out := make(map[string]*api.DeviceStats, len(st.Devices))
	for _, d := range st.Devices {
		out[d.ID] = d
	}
	return out
}

// gpuTable renders a node's GPU instances: ID, device, model, memory,
// health, the allocation holding it, and with telemetry the utilisation
// and memory in use.
func gpuTable(node *api.Node, holder map[string]string, tel map[string]*api.DeviceStats) string {
	if node.NodeResources == nil {
		return "No devices"
	}
	var rows [][]string
	for _, g := range node.NodeResources.Devices {
		if g == nil {
			continue
		}
		mem := "<unknown>"
		if a := g.Attributes["memory"]; a != nil {
			mem = a.Text()
		}
		for _, in := range g.Instances {
			if in == nil {
				continue
			}
			health := gpuHealth(in)
			alloc := holder[in.ID]
			if alloc == "" {
				alloc = "<free>"
			}
			row := []string{in.ID, g.Vendor + "/" + g.Type, g.Name, mem, health, alloc}
			if tel != nil {
				util, used := "<none>", "<none>"
				if d := tel[in.ID]; d != nil && d.Error == "" {
					util = fmt.Sprintf("%.0f%%", d.UtilizationPercent)
					used = fmt.Sprintf("%d MiB", d.MemoryUsedMiB)
					if d.Simulated {
						util += " (simulated)"
					}
				}
				row = append(row, util, used)
			}
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return "No devices"
	}
	headers := []string{"Instance ID", "Device", "Model", "Memory", "Health", "Allocation"}
	if tel != nil {
		headers = append(headers, "Utilization", "Memory Used")
	}
	return table(headers, rows)
}

// nodesGPUs renders, for -verbose lists, each node's GPUs under its name.
func (m *Meta) nodesGPUs(client *api.Client, nodes []*api.Node) string {
	allocs, _, err := client.Allocations().List(nil)
	if err != nil {
		return fmt.Sprintf("\nError querying allocations: %v", err)
	}
	holder := gpuHolders(allocs)
	var sb strings.Builder
	for _, n := range nodes {
		full, _, err := client.Nodes().Info(n.ID, nil)
		if err != nil {
			fmt.Fprintf(&sb, "\nNode %s: error: %v\n", shortID(n.ID), err)
			continue
		}
		fmt.Fprintf(&sb, "\nGPUs of %s (%s)\n", full.Name, shortID(full.ID))
		sb.WriteString(gpuTable(full, holder, m.localTelemetry(client, full.ID)))
		sb.WriteString("\n")
	}
	return strings.TrimRight(sb.String(), "\n")
}

// gpuHealth is the Health column of one device instance: "healthy", or
// "unhealthy (<reason>)" without repeating the word when the client's
// description already starts with it ("unhealthy: XID 79 (...) at ...").
func gpuHealth(in *api.DeviceInstance) string {
	if in.Healthy {
		return "healthy"
	}
	d := strings.TrimSpace(in.HealthDescription)
	if rest, ok := strings.CutPrefix(d, "unhealthy"); ok {
		d = strings.TrimSpace(strings.TrimPrefix(rest, ":"))
	}
	if d == "" {
		return "unhealthy"
	}
	return "unhealthy (" + d + ")"
}
