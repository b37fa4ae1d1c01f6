package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
	"github.com/hashicorp/cli"
)

// JobRunCommand parses a jobspec locally, registers it and monitors the
// evaluation it creates.
type JobRunCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobRunCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job run [options] FILE

  Parses the jobspec FILE, submits the job and, unless -detach is given,
  follows the evaluation until it finishes. A jobspec error prints as
  file:line:col: message and nothing is submitted.

  Exit codes: 0 when every allocation was placed, 2 when some could not be
  placed (the evaluation is blocked or failed), 1 on any other error.
` + generalOptions + namespaceOption + `
Run Options:

  -detach
    Return as soon as the job is submitted; print the evaluation ID.

  -progress
    Once every allocation is placed, follow its tasks until they start,
    as a table (redrawn in place on a terminal, a line per change
    otherwise). Default: on when stdout is a terminal.

  -var 'key=value'
    Value for a variable of the jobspec. May be repeated.

  -var-file=FILE
    HCL file of variable values ("name = value" lines). -var values win.
`)
}

// Synopsis returns a one-line description.
func (c *JobRunCommand) Synopsis() string { return "Run a new job or update an existing job" }

// varFlags collects repeated -var key=value flags.
type varFlags map[string]string

func (v varFlags) String() string { return "" }

func (v varFlags) Set(s string) error {
	k, val, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	v[strings.TrimSpace(k)] = val
	return nil
}

// Run parses, registers and monitors.
func (c *JobRunCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job run", false)
	var detach bool
	fs.BoolVar(&detach, "detach", false, "")
	progress := c.Meta.terminal()
	fs.BoolVar(&progress, "progress", progress, "")
	jf := addJobFileOptions(fs)
	job, client, code := c.Meta.jobFileAndClient(fs, args, jf)
	if job == nil || client == nil {
		return code
	}
	resp, _, err := client.Jobs().Register(job, nil)
	if err != nil {
		return c.Meta.jobSubmitError("Error submitting job", err, jf.positions)
	}
	if resp.Warnings != "" {
		c.Meta.UI.Warn("Job Warnings:\n" + resp.Warnings + "\n")
	}
	if detach || resp.EvalID == "" {
		c.Meta.UI.Output("Job registration successful")
		if resp.EvalID != "" {
			c.Meta.UI.Output("Evaluation ID: " + resp.EvalID)
		}
		if hint := parentJobHint(job); hint != "" {
			c.Meta.UI.Output(hint)
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code = c.Meta.monitor(ctx, client, resp.EvalID)
	if code != exitPlaced || !progress {
		return code
	}
	return c.Meta.watchStart(ctx, client, job.ID, resp.EvalID, c.Meta.terminal())
}

// jobFileOptions are the -var and -var-file options of a command that
// reads a jobspec (job run, job plan).
type jobFileOptions struct {
	varFile string
	vars    varFlags
	// positions are where the parsed job's fields are in the file, set
	// by jobFileAndClient, so a server's validation error can name
	// file:line:col.
	positions *jobspec.Positions
}

// addJobFileOptions registers -var and -var-file on fs.
func addJobFileOptions(fs *flag.FlagSet) *jobFileOptions {
	o := &jobFileOptions{vars: varFlags{}}
	fs.Var(o.vars, "var", "")
	fs.StringVar(&o.varFile, "var-file", "", "")
	return o
}

// jobFileAndClient parses args, which must be one argument (the jobspec
// file), parses that jobspec with o's variables and returns the job and
// the API client for -address, which sends the job's namespace (its
// jobspec's, else -namespace, which also fills the job's) as ?namespace=. When either is nil, code is the exit code
// to return: cli.RunResultHelp for bad usage, 1 for a bad jobspec or
// client.
func (m *Meta) jobFileAndClient(fs *flag.FlagSet, args []string, o *jobFileOptions) (job *api.Job, client *api.Client, code int) {
	m.namespaceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		return nil, nil, m.argError(fs, fs.Args(), "This command takes one argument: the jobspec file")
	}
	job, o.positions, code = m.parseJobFile(fs.Arg(0), o.varFile, o.vars)
	if job == nil {
		return nil, nil, code
	}
	// The job acts in its own namespace; -namespace names it for a
	// jobspec that does not. Every request (register or plan, then the
	// evaluation and allocation reads) carries it, so a token scoped to
	// that namespace passes the route checks.
	if job.Namespace == "" {
		job.Namespace = m.namespace
	}
	m.namespace = job.Namespace
	client, err := m.client()
	if err != nil {
		return nil, nil, m.errorf("Error initializing client: %v", err)
	}
	return job, client, 0
}

// parseJobFile parses the jobspec at path with the variables of varFile
// (if any) overridden by vars, and returns the job and where its fields
// are in the file. On error it prints the problem (file:line:col for
// jobspec errors) and returns a nil job and exit code 1.
func (m *Meta) parseJobFile(path, varFile string, vars map[string]string) (*api.Job, *jobspec.Positions, int) {
	all := map[string]string{}
	if varFile != "" {
		fileVars, err := jobspec.ParseVarFile(varFile)
		if err != nil {
			var perr *jobspec.Error
			if errors.As(err, &perr) {
				return nil, nil, m.errorf("Error: %v", perr)
			}
			return nil, nil, m.errorf("Error: reading var file: %v", err)
		}
		for k, v := range fileVars {
			all[k] = v
		}
	}
	for k, v := range vars {
		all[k] = v
	}
	job, pos, err := jobspec.ParseFileWithPositions(path, all)
	if err != nil {
		var perr *jobspec.Error
		if errors.As(err, &perr) {
			return nil, nil, m.errorf("%v", perr)
		}
		return nil, nil, m.errorf("Error reading jobspec: %v", err)
	}
	return job, pos, 0
}
