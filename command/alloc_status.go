package command

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// AllocStatusCommand shows one allocation: its placement, statuses, and per
// task the state, exit code, devices and recent events.
type AllocStatusCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *AllocStatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer alloc status [options] ALLOC

  Shows the allocation with the given ID or unique ID prefix (such as the
  8-character IDs lists show): where it runs, its statuses and, for each
  task, its state, exit code, GPU instances and recent events.
` + generalOptions + `
Status Options:
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *AllocStatusCommand) Synopsis() string { return "Display allocation status information" }

// Run shows the allocation.
func (c *AllocStatusCommand) Run(args []string) int {
	fs := c.Meta.flagSet("alloc status", true)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	_, alloc, code := c.Meta.allocFromArgs(fs.Args(), false)
	if alloc == nil {
		return code
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(alloc)
	}
	c.Meta.UI.Output(c.Meta.formatAlloc(alloc))
	return 0
}

// allocFromArgs checks that args hold the allocation ID (and, with
// withTask, optionally a task name), then finds the allocation. On error it
// prints why and returns a nil allocation and the exit code.
func (m *Meta) allocFromArgs(args []string, withTask bool) (*api.Client, *api.Allocation, int) {
	switch {
	case !withTask && len(args) != 1:
		m.UI.Error("This command takes one argument: the allocation ID")
		return nil, nil, cli.RunResultHelp
	case withTask && (len(args) < 1 || len(args) > 2):
		m.UI.Error("This command takes one or two arguments: the allocation ID and the task")
		return nil, nil, cli.RunResultHelp
	}
	client, err := m.client()
	if err != nil {
		return nil, nil, m.errorf("Error initializing client: %v", err)
	}
	alloc, code := m.resolveAlloc(client, args[0])
	return client, alloc, code
}

// resolveAlloc finds the allocation whose ID is or starts with prefix. When
// none or several match it prints why and returns a nil allocation and exit
// code 1.
func (m *Meta) resolveAlloc(client *api.Client, prefix string) (*api.Allocation, int) {
	if strings.TrimSpace(prefix) == "" {
		return nil, m.errorf("Allocation ID must not be empty")
	}
	allocs, _, err := client.Allocations().List(&api.QueryOptions{Prefix: prefix})
	if err != nil {
		return nil, m.errorf("Error querying allocations: %v", err)
	}
	var pick *api.Allocation
	for _, a := range allocs {
		if a.ID == prefix {
			pick = a
		}
	}
	if pick == nil {
		switch len(allocs) {
		case 0:
			return nil, m.errorf("No allocation(s) with prefix or ID %q found", prefix)
		case 1:
			pick = allocs[0]
		default:
			m.UI.Error(fmt.Sprintf("Prefix matched multiple allocations\n\n%s", m.allocTable(allocs)))
			return nil, 1
		}
	}
	alloc, _, err := client.Allocations().Info(pick.ID, nil)
	if err != nil {
		return nil, m.errorf("Error querying allocation %q: %v", pick.ID, err)
	}
	return alloc, 0
}

// formatAlloc renders the allocation and its tasks.
func (m *Meta) formatAlloc(a *api.Allocation) string {
	var sb strings.Builder
	rows := [][2]string{
		{"ID", a.ID},
		{"Eval ID", shortID(a.EvalID)},
		{"Name", a.Name},
		{"Node ID", shortID(a.NodeID)},
		{"Node Name", a.NodeName},
		{"Job ID", a.JobID},
		{"Client Status", a.ClientStatus},
		{"Client Description", a.ClientDescription},
		{"Desired Status", a.DesiredStatus},
		{"Desired Description", a.DesiredDescription},
	}
	rows = append(rows, endpointMemberRows(a.EndpointMember)...)
	rows = append(rows, [2]string{"Created", m.formatUnixNano(a.CreateTime)}, [2]string{"Modified", m.formatUnixNano(a.ModifyTime)})
	sb.WriteString(kv(rows))
	// The host ports, as Nomad's "Allocation Addresses".
	if ar := a.AllocatedResources; ar != nil && ar.Shared != nil && len(ar.Shared.Ports) > 0 {
		rows := make([][]string, 0, len(ar.Shared.Ports))
		for _, p := range ar.Shared.Ports {
			to := "-"
			if p.To > 0 {
				to = strconv.Itoa(p.To)
			}
			rows = append(rows, []string{p.Label, net.JoinHostPort(p.HostIP, strconv.Itoa(p.Value)), to})
		}
		sb.WriteString("\n\nAllocation Addresses\n")
		sb.WriteString(table([]string{"Label", "Address", "To"}, rows))
	}
	for _, name := range allocTaskNames(a) {
		sb.WriteString("\n\n")
		sb.WriteString(m.formatTask(a, name))
	}
	if ins := allocInputs(a); len(ins) > 0 {
		sb.WriteString("\n\nInputs\n")
		sb.WriteString(table([]string{"Task", "Source", "Destination"}, ins))
	}
	if len(a.Outputs) > 0 {
		sb.WriteString("\n\nOutputs\n")
		sb.WriteString(formatOutputs(a.Outputs))
	}
	if a.LogArchive != "" {
		sb.WriteString("\n\nLog Archive = artifact://sha256/" + a.LogArchive)
	}
	return sb.String()
}

// endpointMemberRows are the "Endpoint" lines of an endpoint member: admitted,
// or not and why, and the identity the router compared (job version and
// the first 12 characters of each digest); none without an endpoint.
func endpointMemberRows(em *api.AllocEndpointMember) [][2]string {
	if em == nil {
		return nil
	}
	state := "admitted"
	if !em.Admitted {
		state = "not admitted"
		if em.Reason != "" {
			state += ": " + em.Reason
		}
	}
	short := func(d string) string {
		if d == "" {
			return "-"
		}
		if i := strings.IndexByte(d, ':'); i >= 0 && i < len(d)-1 {
			d = d[i+1:]
		}
		if len(d) > 12 {
			d = d[:12]
		}
		return d
	}
	return [][2]string{
		{"Endpoint", state},
		{"Endpoint Identity", fmt.Sprintf("job version %d, artifact %s, config %s", em.JobVersion, short(em.ArtifactDigest), short(em.ConfigDigest))},
	}
}

// allocTaskNames returns the allocation's task names: the group's tasks in
// jobspec order, then any other task with state or resources, sorted.
func allocTaskNames(a *api.Allocation) []string {
	var names []string
	seen := map[string]bool{}
	if a.Job != nil {
		for _, tg := range a.Job.TaskGroups {
			if tg == nil || tg.Name != a.TaskGroup {
				continue
			}
			for _, t := range tg.Tasks {
				if t != nil && !seen[t.Name] {
					seen[t.Name] = true
					names = append(names, t.Name)
				}
			}
		}
	}
	var extra []string
	for n := range a.TaskStates {
		if !seen[n] {
			seen[n] = true
			extra = append(extra, n)
		}
	}
	if a.AllocatedResources != nil {
		for n := range a.AllocatedResources.Tasks {
			if !seen[n] {
				seen[n] = true
				extra = append(extra, n)
			}
		}
	}
	sort.Strings(extra)
	return append(names, extra...)
}

// formatTask renders one task: state, exit code, resources, devices and
// recent events, newest first.
func (m *Meta) formatTask(a *api.Allocation, name string) string {
	ts := a.TaskStates[name]
	state := api.TaskStatePending
	if ts != nil && ts.State != "" {
		state = ts.State
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "Task %q is %q\n", name, state)
	pairs := [][2]string{{"State", state}}
	if ts != nil {
		// A task that never started has no exit code: "0" next to
		// Failed = true would say it ran and succeeded.
		exit := "<none>"
		switch {
		case ts.State == api.TaskStateDead && ts.StartedAt.IsZero():
			exit = "none (never started)"
		case ts.State == api.TaskStateDead:
			exit = strconv.Itoa(ts.ExitCode)
		}
		pairs = append(pairs,
			[2]string{"Exit Code", exit},
			[2]string{"Failed", strconv.FormatBool(ts.Failed)},
			[2]string{"Restarts", strconv.FormatUint(ts.Restarts, 10)},
			[2]string{"Started At", m.formatTime(ts.StartedAt)},
			[2]string{"Finished At", m.formatTime(ts.FinishedAt)},
		)
	}
	if d := taskMaxRunDuration(a, name); d > 0 {
		pairs = append(pairs, [2]string{"Max Run Duration", d.String()})
		if ts != nil && !ts.Deadline.IsZero() {
			pairs = append(pairs, [2]string{"Deadline", m.formatTime(ts.Deadline)})
		}
	}
	var res *api.AllocatedTaskResources
	if a.AllocatedResources != nil {
		res = a.AllocatedResources.Tasks[name]
	}
	if res != nil {
		pairs = append(pairs,
			[2]string{"CPU", fmt.Sprintf("%d MHz", res.Cpu.CpuShares)},
			[2]string{"Memory", fmt.Sprintf("%d MiB", res.Memory.MemoryMB)},
		)
		devices := make([]string, 0, len(res.Devices))
		for _, d := range res.Devices {
			devices = append(devices, fmt.Sprintf("%s: %s", d.ID(), strings.Join(d.DeviceIDs, ", ")))
		}
		pairs = append(pairs, [2]string{"Devices", strings.Join(devices, "; ")})
	}
	sb.WriteString(kv(pairs))
	sb.WriteString("\n\nRecent Events:\n")
	if ts == nil || len(ts.Events) == 0 {
		sb.WriteString("No events")
		return sb.String()
	}
	const maxEvents = 10
	rows := make([][]string, 0, maxEvents)
	for i := len(ts.Events) - 1; i >= 0 && len(rows) < maxEvents; i-- {
		e := ts.Events[i]
		if e == nil {
			continue
		}
		rows = append(rows, []string{m.formatUnixNano(e.Time), e.Type, eventDescription(e)})
	}
	sb.WriteString(table([]string{"Time", "Type", "Description"}, rows))
	return sb.String()
}

// eventDescription is the event's display message, else its message, else
// a description built from its exit code or signal.
func eventDescription(e *api.TaskEvent) string {
	switch {
	case e.DisplayMessage != "":
		return e.DisplayMessage
	case e.Message != "":
		return e.Message
	case e.Type == "Terminated":
		return fmt.Sprintf("Exit Code: %d, Signal: %d", e.ExitCode, e.Signal)
	}
	return ""
}

// allocInputs lists the artifact blocks of the allocation's tasks as
// rows of task, source and destination.
func allocInputs(a *api.Allocation) [][]string {
	var rows [][]string
	if a.Job == nil {
		return nil
	}
	for _, tg := range a.Job.TaskGroups {
		if tg == nil || tg.Name != a.TaskGroup {
			continue
		}
		for _, t := range tg.Tasks {
			if t == nil {
				continue
			}
			for _, art := range t.Artifacts {
				if art == nil {
					continue
				}
				dest := art.RelativeDest
				if dest == "" {
					dest = "local/"
				}
				rows = append(rows, []string{t.Name, art.GetterSource, dest})
			}
		}
	}
	return rows
}

// taskMaxRunDuration is the max_run_duration that applies to the task of
// the allocation's group: the shorter of the group's and the task's, 0
// when neither is set or the allocation carries no job.
func taskMaxRunDuration(a *api.Allocation, task string) time.Duration {
	if a.Job == nil {
		return 0
	}
	for _, tg := range a.Job.TaskGroups {
		if tg == nil || tg.Name != a.TaskGroup {
			continue
		}
		d := tg.MaxRunDuration
		for _, t := range tg.Tasks {
			if t != nil && t.Name == task && t.MaxRunDuration > 0 && (d <= 0 || t.MaxRunDuration < d) {
				d = t.MaxRunDuration
			}
		}
		return max(d, 0)
	}
	return 0
}
