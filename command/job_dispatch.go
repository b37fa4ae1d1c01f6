package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/cli"
)

// JobDispatchCommand dispatches a parameterized job (Nomad's `job
// dispatch`).
type JobDispatchCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *JobDispatchCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer job dispatch [options] JOB [payload-file|-]

  Creates a child of the parameterized job JOB, named
  JOB/dispatch-<unix>-<hex>, with the payload read from the file (or stdin
  for "-"; at most 16 KiB) and the meta given. A task with a
  dispatch_payload block finds the payload in local/<file>; meta is in the
  task's environment as NOMAD_META_<key> and GPULAYER_META_<key>. Unless
  -detach, the child's evaluation is monitored.
` + generalOptions + `
Dispatch Options:

  -meta key=value
    Meta for the child; repeat for several. Keys must be in the job's
    meta_required or meta_optional, and every meta_required key given.

  -idempotency-token TOKEN
    A dispatch with the token of an existing child creates nothing and
    names that child.

  -detach
    Return as soon as the child is created; print its ID and evaluation.
`)
}

// Synopsis returns a one-line description.
func (c *JobDispatchCommand) Synopsis() string { return "Dispatch an instance of a parameterized job" }

// metaFlags collects repeated -meta key=value flags.
type metaFlags map[string]string

func (m metaFlags) String() string { return "" }

func (m metaFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	m[k] = val
	return nil
}

// Run dispatches the job.
func (c *JobDispatchCommand) Run(args []string) int {
	fs := c.Meta.flagSet("job dispatch", false)
	meta := metaFlags{}
	var token string
	var detach bool
	fs.Var(meta, "meta", "")
	fs.StringVar(&token, "idempotency-token", "", "")
	fs.BoolVar(&detach, "detach", false, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one or two arguments: the job ID and a payload file (or - for stdin)")
	}
	var payload []byte
	if fs.NArg() == 2 {
		var rd io.Reader = os.Stdin
		if p := fs.Arg(1); p != "-" {
			f, err := os.Open(p)
			if err != nil {
				return c.Meta.errorf("Error reading the payload: %v", err)
			}
			defer f.Close()
			rd = f
		}
		b, err := io.ReadAll(io.LimitReader(rd, api.MaxDispatchPayload+1))
		if err != nil {
			return c.Meta.errorf("Error reading the payload: %v", err)
		}
		if len(b) > api.MaxDispatchPayload {
			return c.Meta.errorf("Error: the payload is larger than %d bytes (16 KiB)", api.MaxDispatchPayload)
		}
		payload = b
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	if len(meta) == 0 {
		meta = nil
	}
	resp, _, err := client.Jobs().Dispatch(fs.Arg(0), meta, payload, token, nil)
	if err != nil {
		return c.Meta.errorf("Error dispatching job: %v", err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Dispatched Job ID = %s", resp.DispatchedJobID))
	if resp.EvalID == "" {
		c.Meta.UI.Output(noEvalReason(client, fs.Arg(0), resp.DispatchedJobID))
		return 0
	}
	c.Meta.UI.Output(fmt.Sprintf("Evaluation ID     = %s", resp.EvalID))
	if detach {
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return c.Meta.monitor(ctx, client, resp.EvalID)
}

// noEvalReason says why a dispatch answered no evaluation: the child is
// held (its parent already runs max_running_children children), or the
// idempotency token named an existing child, which is not evaluated
// again.
func noEvalReason(client *api.Client, parent, childID string) string {
	child, _, err := client.Jobs().Info(childID, nil)
	switch {
	case err != nil:
		return fmt.Sprintf("No evaluation: the child is held (max_running_children) or already existed (idempotency token); reading it failed: %v", err)
	case child.Held:
		return fmt.Sprintf("Held: job %q already runs its max_running_children; this child starts when one of them finishes (gpulayer job status %s lists them)", parent, parent)
	default:
		return fmt.Sprintf("No evaluation: the idempotency token names this existing child (status %s); nothing new was dispatched", child.Status)
	}
}
