package command

import (
	"fmt"
	"strings"
)

// JobValidateCommand checks a jobspec against the server's validation,
// changing nothing.
type JobValidateCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobValidateCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job validate [options] FILE

  Parses the jobspec FILE and asks the server to validate it as a
  registration would, without registering it or planning it. Each problem
  is shown at the line of the field it names.

  Exits 0 when the job is valid, 1 otherwise.

  When ACLs are on, the token needs read-job in the job's namespace.
` + generalOptions + namespaceOption + `
Validate Options:

  -var 'name=value'
    A value for a jobspec variable; may be repeated.

  -var-file=<path>
    An HCL file of variable values.
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *JobValidateCommand) Synopsis() string { return "Check a jobspec for problems" }

// Run validates the job.
func (c *JobValidateCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job validate", true)
	jf := addJobFileOptions(fs)
	job, client, code := c.Meta.jobFileAndClient(fs, args, jf)
	if job == nil || client == nil {
		return code
	}
	resp, err := client.Jobs().Validate(job)
	if err != nil {
		return c.Meta.jobSubmitError("Error validating job", err, jf.positions)
	}
	if c.Meta.jsonOutput {
		if rc := c.Meta.printJSON(resp); rc != 0 {
			return 1
		}
		if len(resp.ValidationErrors) > 0 {
			return 1
		}
		return 0
	}
	if resp.Warnings != "" {
		c.Meta.UI.Warn("Job Warnings:\n" + resp.Warnings)
	}
	if len(resp.ValidationErrors) > 0 {
		msg := resp.Error
		if text, ok := jf.positions.Annotate(msg); ok {
			msg = text
		}
		c.Meta.UI.Error(fmt.Sprintf("Job validation errors:\n%s", msg))
		return 1
	}
	c.Meta.UI.Output("Job validation successful")
	return 0
}
