package command

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// DeploymentCommand groups the deployment subcommands.
type DeploymentCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *DeploymentCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer deployment <subcommand> [options] [args]

  List and inspect deployments (the rollout of a job version under its
  update block), promote their canaries or fail them.
`)
}

// Synopsis returns a one-line description.
func (c *DeploymentCommand) Synopsis() string { return "Interact with deployments" }

// Run prints help; see groupRun.
func (c *DeploymentCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// DeploymentListCommand lists deployments.
type DeploymentListCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *DeploymentListCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer deployment list [options]

  Lists every deployment: ID, job, job version, status and description.
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *DeploymentListCommand) Synopsis() string { return "List all deployments" }

// Run lists the deployments.
func (c *DeploymentListCommand) Run(args []string) int {
	fs := c.Meta.flagSet("deployment list", true)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	ds, _, err := client.Deployments().List(nil)
	if err != nil {
		return c.Meta.errorf("Error retrieving deployments: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(ds)
	}
	if len(ds) == 0 {
		c.Meta.UI.Output("No deployments found")
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].CreateIndex > ds[j].CreateIndex })
	c.Meta.UI.Output(deploymentTable(ds))
	return 0
}

func deploymentTable(ds []*api.Deployment) string {
	rows := make([][]string, 0, len(ds))
	for _, d := range ds {
		rows = append(rows, []string{shortID(d.ID), d.JobID, strconv.FormatUint(d.JobVersion, 10), d.Status, d.StatusDescription})
	}
	return table([]string{"ID", "Job ID", "Job Version", "Status", "Description"}, rows)
}

// findDeployment returns the deployment whose ID is or starts with
// prefix, or prints why not and returns nil with the exit code.
func (m *Meta) findDeployment(client *api.Client, prefix string) (*api.Deployment, int) {
	if strings.TrimSpace(prefix) == "" {
		return nil, m.errorf("Deployment ID must not be empty")
	}
	ds, _, err := client.Deployments().List(&api.QueryOptions{Prefix: prefix})
	if err != nil {
		return nil, m.errorf("Error retrieving deployments: %v", err)
	}
	for _, d := range ds {
		if d.ID == prefix {
			return d, 0
		}
	}
	switch len(ds) {
	case 0:
		return nil, m.errorf("No deployment with prefix or ID %q found", prefix)
	case 1:
		return ds[0], 0
	}
	m.UI.Error(fmt.Sprintf("Prefix matched multiple deployments\n\n%s", deploymentTable(ds)))
	return nil, 1
}

// DeploymentStatusCommand shows one deployment.
type DeploymentStatusCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *DeploymentStatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer deployment status [options] ID

  Shows the deployment with the given ID (or unique ID prefix): its status
  and, per task group, canaries, placed, healthy and unhealthy
  allocations and the progress deadline.
` + generalOptions + jsonOption)
}

// Synopsis returns a one-line description.
func (c *DeploymentStatusCommand) Synopsis() string { return "Display the status of a deployment" }

// Run shows the deployment.
func (c *DeploymentStatusCommand) Run(args []string) int {
	fs := c.Meta.flagSet("deployment status", true)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the deployment ID")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	d, code := c.Meta.findDeployment(client, fs.Arg(0))
	if d == nil {
		return code
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(d)
	}
	c.Meta.UI.Output(c.Meta.formatDeployment(d))
	return 0
}

// formatDeployment renders a deployment as `deployment status` shows it.
func (m *Meta) formatDeployment(d *api.Deployment) string {
	out := kv([][2]string{
		{"ID", d.ID},
		{"Job ID", d.JobID},
		{"Job Version", strconv.FormatUint(d.JobVersion, 10)},
		{"Status", d.Status},
		{"Description", d.StatusDescription},
	})
	names := make([]string, 0, len(d.TaskGroups))
	canaries := false
	for n, st := range d.TaskGroups {
		names = append(names, n)
		canaries = canaries || st.DesiredCanaries > 0
	}
	sort.Strings(names)
	headers := []string{"Task Group", "Auto Revert"}
	if canaries {
		headers = append(headers, "Promoted", "Desired Canaries")
	}
	headers = append(headers, "Desired", "Placed", "Healthy", "Unhealthy", "Progress Deadline")
	rows := make([][]string, 0, len(names))
	for _, n := range names {
		st := d.TaskGroups[n]
		row := []string{n, strconv.FormatBool(st.AutoRevert)}
		if canaries {
			row = append(row, strconv.FormatBool(st.Promoted), strconv.Itoa(st.DesiredCanaries))
		}
		deadline := "<none>"
		if !st.RequireProgressBy.IsZero() {
			deadline = st.RequireProgressBy.In(m.Location).Format("2006-01-02T15:04:05Z07:00")
		}
		row = append(row, strconv.Itoa(st.DesiredTotal), strconv.Itoa(st.PlacedAllocs), strconv.Itoa(st.HealthyAllocs),
			strconv.Itoa(st.UnhealthyAllocs), deadline)
		rows = append(rows, row)
	}
	return out + "\n\nDeployed\n" + table(headers, rows)
}

// DeploymentPromoteCommand promotes canaries.
type DeploymentPromoteCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *DeploymentPromoteCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer deployment promote [options] ID

  Promotes the canaries of the deployment with the given ID (or unique ID
  prefix): the old allocations are then replaced. Every group by default,
  or only those named with -group. The canaries must be healthy.
` + generalOptions + `
Promote Options:

  -group=<name>
    Promote only this group's canaries; may be given more than once.
`)
}

// Synopsis returns a one-line description.
func (c *DeploymentPromoteCommand) Synopsis() string { return "Promote canaries in a deployment" }

// Run promotes.
func (c *DeploymentPromoteCommand) Run(args []string) int {
	fs := c.Meta.flagSet("deployment promote", false)
	var groups stringList
	fs.Var(&groups, "group", "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the deployment ID")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	d, code := c.Meta.findDeployment(client, fs.Arg(0))
	if d == nil {
		return code
	}
	var resp *api.DeploymentUpdateResponse
	if len(groups) > 0 {
		resp, _, err = client.Deployments().PromoteGroups(d.ID, groups, nil)
	} else {
		resp, _, err = client.Deployments().PromoteAll(d.ID, nil)
	}
	if err != nil {
		return c.Meta.errorf("Error promoting deployment: %v", err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Deployment %q promoted\nEvaluation ID: %s", shortID(d.ID), resp.EvalID))
	return 0
}

// DeploymentFailCommand fails a deployment.
type DeploymentFailCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *DeploymentFailCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer deployment fail [options] ID

  Marks the deployment with the given ID (or unique ID prefix) failed:
  nothing more is replaced, and a group with auto_revert rolls back to the
  newest stable job version.
` + generalOptions)
}

// Synopsis returns a one-line description.
func (c *DeploymentFailCommand) Synopsis() string { return "Manually fail a deployment" }

// Run fails the deployment.
func (c *DeploymentFailCommand) Run(args []string) int {
	fs := c.Meta.flagSet("deployment fail", false)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the deployment ID")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	d, code := c.Meta.findDeployment(client, fs.Arg(0))
	if d == nil {
		return code
	}
	resp, _, err := client.Deployments().Fail(d.ID, nil)
	if err != nil {
		return c.Meta.errorf("Error failing deployment: %v", err)
	}
	msg := fmt.Sprintf("Deployment %q failed", shortID(d.ID))
	if resp.RevertedJobVersion != nil {
		msg += fmt.Sprintf("; rolling back to job version %d", *resp.RevertedJobVersion)
	}
	c.Meta.UI.Output(msg + "\nEvaluation ID: " + resp.EvalID)
	return 0
}
