package command

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// JobHistoryCommand lists the kept versions of a job (Nomad's `job
// history`), with -p the change each version made.
type JobHistoryCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobHistoryCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job history [options] ID

  Lists the kept versions of the job with the given ID (or unique ID
  prefix), newest first: version number, stability and submit time. The
  servers keep the last 6 versions of a job, and the newest stable one.
` + generalOptions + namespaceOption + jsonOption + `
History Options:

  -p
    Show the change each version made to the one before it.

  -version=<n>
    Show only version n.
`)
}

// Synopsis returns a one-line description.
func (c *JobHistoryCommand) Synopsis() string { return "Display all tracked versions of a job" }

// Run lists the versions.
func (c *JobHistoryCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job history", true)
	c.Meta.namespaceFlag(fs)
	var diffs bool
	var version string
	fs.BoolVar(&diffs, "p", false, "")
	fs.StringVar(&version, "version", "", "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the job ID")
	}
	var want *uint64
	if version != "" {
		v, err := strconv.ParseUint(version, 10, 64)
		if err != nil {
			return c.Meta.errorf("-version: want a version number, got %q", version)
		}
		want = &v
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	job, code := c.Meta.lookupJob(client, fs.Arg(0))
	if job == nil {
		return code
	}
	versions, vdiffs, _, err := client.Jobs().Versions(job.ID, diffs, nil)
	if err != nil {
		return c.Meta.errorf("Error retrieving job versions: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(&api.JobVersionsResponse{Versions: versions, Diffs: vdiffs})
	}
	var blocks []string
	found := false
	for i, v := range versions {
		if want != nil && v.Version != *want {
			continue
		}
		found = true
		pairs := [][2]string{
			{"Version", strconv.FormatUint(v.Version, 10)},
			{"Stable", strconv.FormatBool(v.Stable)},
			{"Submit Date", c.Meta.formatUnixNano(v.SubmitTime)},
		}
		out := kv(pairs)
		if diffs && i < len(vdiffs) && vdiffs[i] != nil {
			out += "\nDiff        =\n" + formatJobDiff(vdiffs[i])
		}
		blocks = append(blocks, out)
	}
	if want != nil && !found {
		return c.Meta.errorf("Job %q has no kept version %d", job.ID, *want)
	}
	c.Meta.UI.Output(strings.Join(blocks, "\n\n"))
	return 0
}

// formatJobDiff renders a version diff one change a line: "+ path =
// value", "- path = value", "~ path: old => new".
func formatJobDiff(d *api.JobDiff) string {
	if d.Type == "None" || len(d.Fields) == 0 {
		return "  (no change)"
	}
	lines := make([]string, 0, len(d.Fields))
	for _, f := range d.Fields {
		switch f.Type {
		case "Added":
			lines = append(lines, fmt.Sprintf("  + %s = %s", f.Name, f.New))
		case "Deleted":
			lines = append(lines, fmt.Sprintf("  - %s = %s", f.Name, f.Old))
		default:
			lines = append(lines, fmt.Sprintf("  ~ %s: %s => %s", f.Name, f.Old, f.New))
		}
	}
	return strings.Join(lines, "\n")
}

// lookupJob finds the one job whose ID is or starts with prefix; when
// there is none or several it prints why and returns nil with the exit
// code.
func (m *Meta) lookupJob(client *api.Client, prefix string) (*api.JobListStub, int) {
	if strings.TrimSpace(prefix) == "" {
		return nil, m.errorf("Job ID must not be empty")
	}
	jobs, _, err := client.Jobs().List(&api.QueryOptions{Prefix: prefix})
	if err != nil {
		return nil, m.errorf("Error querying jobs: %v", err)
	}
	job := pickJob(jobs, prefix)
	if job == nil {
		if len(jobs) == 0 {
			return nil, m.errorf("No job(s) with prefix or ID %q found", prefix)
		}
		m.UI.Error(fmt.Sprintf("Prefix matched multiple jobs\n\n%s", m.jobList(jobs)))
		return nil, 1
	}
	return job, 0
}
