package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Event topics of /v1/event/stream.
const (
	TopicJob        = "Job"
	TopicAllocation = "Allocation"
	TopicNode       = "Node"
	TopicEvaluation = "Evaluation"
	TopicDeployment = "Deployment"
	// TopicService carries service registrations; the payload key is
	// "Service".
	TopicService = "Service"
	// TopicEndpointAlias carries endpoint alias promotions and demotions
	// (a GPUlayer addition); the payload key is "EndpointAlias".
	TopicEndpointAlias = "EndpointAlias"
	TopicAll           = "*"
)

// Event types of TopicEndpointAlias: a promotion (or a move to another
// endpoint) and a demotion, whose payload is the alias as it was.
const (
	EventEndpointAliasPromoted = "EndpointAliasPromoted"
	EventEndpointAliasDemoted  = "EndpointAliasDemoted"
)

// Event is one state change: Topic, Type (such as "AllocationUpdated"),
// Key (the object's ID), FilterKeys (an allocation's job and node IDs, an
// evaluation's job ID), the Raft Index, and the object after the change
// in Payload under its topic name ("Job", "Allocation", ...).
type Event struct {
	Topic      string
	Type       string
	Key        string
	FilterKeys []string `json:",omitempty"`
	// Namespace is the namespace of a job, allocation or evaluation
	// event; empty for nodes.
	Namespace string `json:",omitempty"`
	Index     uint64
	Payload   map[string]json.RawMessage
}

// EventBatch is every matching event of one Raft index. A batch with a
// zero Index is a heartbeat; one with Err set ends the stream.
type EventBatch struct {
	Index  uint64
	Events []*Event
	// Err is set when the stream failed or the server ended it (for
	// instance because the reader fell too far behind).
	Err error `json:"-"`
}

// ErrEventsGone is returned when the server no longer holds the events
// after the requested index (HTTP 410): re-read the state and stream from
// its index.
var ErrEventsGone = errors.New("events after the requested index are gone")

// EventStream is the client for /v1/event/stream.
type EventStream struct{ c *Client }

// EventStream returns the event stream endpoint.
func (c *Client) EventStream() *EventStream { return &EventStream{c: c} }

// Stream subscribes to the events after Raft index index (0: from now on)
// whose topics match topics, each "Topic" or "Topic:key" (none: all). It
// returns a channel of batches, heartbeats included, closed when ctx ends
// or the stream breaks; a final batch with Err says why it broke. An index
// the server no longer holds is an error wrapping ErrEventsGone; other
// answers are *StatusError.
func (e *EventStream) Stream(ctx context.Context, index uint64, topics []string) (<-chan *EventBatch, error) {
	params := url.Values{}
	params.Set("index", strconv.FormatUint(index, 10))
	for _, t := range topics {
		params.Add("topic", t)
	}
	req, err := e.c.newRequest(ctx, http.MethodGet, "/v1/event/stream", params, nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.c.do(req)
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) && se.Code == http.StatusGone {
			return nil, fmt.Errorf("%w: %v", ErrEventsGone, err)
		}
		return nil, err
	}
	ch := make(chan *EventBatch, 16)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var line struct {
				EventBatch
				Error string
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				send(ctx, ch, &EventBatch{Err: fmt.Errorf("event stream: bad line: %w", err)})
				return
			}
			b := line.EventBatch
			if line.Error != "" {
				b.Err = fmt.Errorf("event stream ended by the server: %s", line.Error)
			}
			if !send(ctx, ch, &b) || b.Err != nil {
				return
			}
		}
		if err := sc.Err(); err != nil && ctx.Err() == nil {
			send(ctx, ch, &EventBatch{Err: fmt.Errorf("event stream: %w", err)})
		}
	}()
	return ch, nil
}

// send delivers b unless ctx ends first.
func send(ctx context.Context, ch chan<- *EventBatch, b *EventBatch) bool {
	select {
	case ch <- b:
		return true
	case <-ctx.Done():
		return false
	}
}

// DeviceStats is one device's telemetry sample (see /v1/client/stats).
type DeviceStats struct {
	ID                 string
	Vendor             string
	Type               string
	Name               string
	Healthy            bool
	UtilizationPercent float64
	MemoryUsedMiB      int64
	MemoryTotalMiB     int64
	Simulated          bool
	AllocID            string
	SampledAt          int64
	Error              string `json:",omitempty"`
}

// NodeDeviceStats is a client's latest GPU telemetry.
type NodeDeviceStats struct {
	NodeID          string
	SampledAt       int64
	IntervalSeconds float64
	Devices         []*DeviceStats
}

// ClientStats returns the GPU telemetry of the agent's own client (GET
// /v1/client/stats); a server-only agent answers 404 (*StatusError).
func (c *Client) ClientStats(q *QueryOptions) (*NodeDeviceStats, error) {
	var out NodeDeviceStats
	if _, err := c.query("/v1/client/stats", &out, q); err != nil {
		return nil, err
	}
	return &out, nil
}
