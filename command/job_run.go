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
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
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
` + generalOptions + `
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
		return c.Meta.errorf("Error submitting job: %v", err)
	}
	if resp.Warnings != "" {
		c.Meta.UI.Warn("Job Warnings:\n" + resp.Warnings + "\n")
	}
	if detach || resp.EvalID == "" {
		c.Meta.UI.Output("Job registration successful")
		if resp.EvalID != "" {
			c.Meta.UI.Output("Evaluation ID: " + resp.EvalID)
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
// the API client for -address. When either is nil, code is the exit code
// to return: cli.RunResultHelp for bad usage, 1 for a bad jobspec or
// client.
func (m *Meta) jobFileAndClient(fs *flag.FlagSet, args []string, o *jobFileOptions) (job *api.Job, client *api.Client, code int) {
	if err := fs.Parse(args); err != nil {
		return nil, nil, cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		m.UI.Error("This command takes one argument: the jobspec file")
		return nil, nil, cli.RunResultHelp
	}
	job, code = m.parseJobFile(fs.Arg(0), o.varFile, o.vars)
	if job == nil {
		return nil, nil, code
	}
	client, err := m.client()
	if err != nil {
		return nil, nil, m.errorf("Error initializing client: %v", err)
	}
	return job, client, 0
}

// parseJobFile parses the jobspec at path with the variables of varFile
// (if any) overridden by vars. On error it prints the problem (file:line:col
// for jobspec errors) and returns a nil job and exit code 1.
func (m *Meta) parseJobFile(path, varFile string, vars map[string]string) (*api.Job, int) {
	all := map[string]string{}
	if varFile != "" {
		fileVars, err := readVarFile(varFile)
		if err != nil {
			return nil, m.errorf("Error: %v", err)
		}
		for k, v := range fileVars {
			all[k] = v
		}
	}
	for k, v := range vars {
		all[k] = v
	}
	job, err := jobspec.ParseFile(path, all)
	if err != nil {
		var perr *jobspec.Error
		if errors.As(err, &perr) {
			return nil, m.errorf("%v", perr)
		}
		return nil, m.errorf("Error reading jobspec: %v", err)
	}
	return job, 0
}

// readVarFile reads "name = value" attributes from an HCL file. A string
// value is passed as its text; any other value (number, bool, list, map) as
// its HCL source, which jobspec converts to the variable's type.
func readVarFile(path string) (map[string]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading var file: %w", err)
	}
	if diags := jobspec.CheckNesting(path, src); diags.HasErrors() {
		return nil, diagError(diags)
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	attrs, diags := f.Body.JustAttributes()
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	out := make(map[string]string, len(attrs))
	for name, a := range attrs {
		v, diags := a.Expr.Value(nil)
		if !diags.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type().FriendlyName() == "string" {
			out[name] = v.AsString()
			continue
		}
		out[name] = string(a.Expr.Range().SliceBytes(src))
	}
	return out, nil
}

// diagError renders HCL diagnostics as "file:line:col: summary: detail"
// lines.
func diagError(diags hcl.Diagnostics) error {
	lines := make([]string, 0, len(diags))
	for _, d := range diags {
		pos := "<unknown>"
		if d.Subject != nil {
			pos = fmt.Sprintf("%s:%d:%d", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		lines = append(lines, pos+": "+msg)
	}
	return errors.New(strings.Join(lines, "\n"))
}
