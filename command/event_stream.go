package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// EventStreamCommand prints the cluster's state changes as they happen.
type EventStreamCommand struct {
	Meta *Meta
	// ctx, when set, replaces the Ctrl-C context (tests end the stream
	// with it).
	ctx context.Context
}

// topicFlags collects repeated -topic flags.
type topicFlags []string

func (t *topicFlags) String() string     { return strings.Join(*t, ",") }
func (t *topicFlags) Set(v string) error { *t = append(*t, v); return nil }

// Help returns the command's usage.
func (c *EventStreamCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer event stream [options]

  Streams changes to jobs, allocations, nodes, evaluations, deployments,
  services and endpoint aliases, one line per event, until Ctrl-C. Each line shows the Raft index, the topic, the event
  type, the object's ID and a short summary. To resume after an
  interruption without missing or repeating an event, pass the last index
  printed as -index.
` + generalOptions + `
Stream Options:

  -index=<n>
    Stream the events after Raft index n. Default 0: from now on.

  -topic=<Topic[:key]>
    Only events of this topic (Job, Allocation, Node, Evaluation,
    Deployment, Service, EndpointAlias or *), optionally only for one
    key: an object ID, the job ID of allocations and evaluations, or an
    alias's name, endpoint or job ID. Repeat for several.

  -json
    Print each batch of events as one line of JSON, as the API sends it.
`)
}

// Synopsis returns a one-line description.
func (c *EventStreamCommand) Synopsis() string { return "Stream cluster state changes" }

// Run streams until Ctrl-C or the stream ends.
func (c *EventStreamCommand) Run(args []string) int {
	fs := c.Meta.flagSet("event stream", true)
	var index uint64
	var topics topicFlags
	fs.Uint64Var(&index, "index", 0, "")
	fs.Var(&topics, "topic", "")
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	ctx := c.ctx
	if ctx == nil {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
	}
	ch, err := client.EventStream().Stream(ctx, index, topics)
	if err != nil {
		if errors.Is(err, api.ErrEventsGone) {
			return c.Meta.errorf("Error: %v\nThe events after index %d are no longer held; start without -index", err, index)
		}
		return c.Meta.errorf("Error opening the event stream: %v", err)
	}
	for b := range ch {
		if b.Err != nil {
			return c.Meta.errorf("Error: %v", b.Err)
		}
		if b.Index == 0 {
			continue // heartbeat
		}
		if c.Meta.jsonOutput {
			raw, err := json.Marshal(b)
			if err != nil {
				return c.Meta.errorf("Error encoding JSON: %v", err)
			}
			c.Meta.UI.Output(string(raw))
			continue
		}
		for _, e := range b.Events {
			c.Meta.UI.Output(formatEvent(e))
		}
	}
	return 0
}

// formatEvent renders "INDEX  Topic  Type  ID  summary".
func formatEvent(e *api.Event) string {
	summary := ""
	switch e.Topic {
	case api.TopicJob:
		var j api.Job
		if json.Unmarshal(e.Payload["Job"], &j) == nil {
			summary = "status " + j.Status
		}
	case api.TopicAllocation:
		var a api.Allocation
		if json.Unmarshal(e.Payload["Allocation"], &a) == nil {
			summary = fmt.Sprintf("job %s, desired %s, client %s", a.JobID, a.DesiredStatus, a.ClientStatus)
		}
	case api.TopicNode:
		var n api.Node
		if json.Unmarshal(e.Payload["Node"], &n) == nil {
			summary = fmt.Sprintf("%s %s", n.Name, n.Status)
		}
	case api.TopicEvaluation:
		var ev api.Evaluation
		if json.Unmarshal(e.Payload["Evaluation"], &ev) == nil {
			summary = fmt.Sprintf("job %s, %s, %s", ev.JobID, ev.TriggeredBy, ev.Status)
		}
	// Service registrations: keyed by service name.
	case api.TopicService:
		var r api.ServiceRegistration
		if json.Unmarshal(e.Payload["Service"], &r) == nil {
			summary = fmt.Sprintf("%s:%d, job %s, alloc %s", r.Address, r.Port, r.JobID, shortID(r.AllocID))
		}
	case api.TopicEndpointAlias:
		var a api.EndpointAlias
		// A demotion's payload is the alias as it was: it no longer
		// resolves to that endpoint, so it is not drawn as "->".
		if json.Unmarshal(e.Payload["EndpointAlias"], &a) == nil {
			if e.Type == api.EventEndpointAliasDemoted {
				summary = fmt.Sprintf("removed from endpoint %s (job %s)", a.Endpoint, a.JobID)
			} else {
				summary = fmt.Sprintf("-> endpoint %s (job %s), by %s", a.Endpoint, a.JobID, a.PromotedBy)
			}
		}
	}
	id := e.Key
	if e.Topic != api.TopicJob && e.Topic != api.TopicService && e.Topic != api.TopicEndpointAlias {
		id = shortID(id)
	}
	return strings.TrimRight(fmt.Sprintf("%-6d %-10s %-18s %-10s %s", e.Index, e.Topic, e.Type, id, summary), " ")
}

// EventCommand groups the event subcommands; run alone it prints help.
type EventCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *EventCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer event <subcommand> [options]

  Watch the cluster's state changes.
`)
}

// Synopsis returns a one-line description.
func (c *EventCommand) Synopsis() string { return "Interact with the event stream" }

// Run prints help; see groupRun.
func (c *EventCommand) Run(args []string) int { return c.Meta.groupRun(args) }
