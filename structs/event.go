package structs

import (
	"fmt"
	"strings"
)

// Event topics: the state store tables a change came from.
const (
	TopicJob        = "Job"
	TopicAllocation = "Allocation"
	TopicNode       = "Node"
	TopicEvaluation = "Evaluation"
	TopicDeployment = "Deployment"
	// TopicService carries service registrations (Nomad's "Service").
	TopicService = "Service"
	// TopicEndpointAlias carries endpoint alias promotions and demotions
	// (a GPUlayer addition, issue 14), keyed by alias name.
	TopicEndpointAlias = "EndpointAlias"
	// TopicAll subscribes to every topic.
	TopicAll = "*"
)

// Event types. A state write that inserts or replaces an object publishes
// the topic's "Updated" type (JobRegistered for jobs); one that deletes an
// object publishes its "Deleted" type.
const (
	EventJobRegistered     = "JobRegistered"
	EventJobDeregistered   = "JobDeregistered"
	EventAllocationUpdated = "AllocationUpdated"
	EventAllocationDeleted = "AllocationDeleted"
	EventNodeUpdated       = "NodeUpdated"
	EventNodeDeleted       = "NodeDeleted"
	EventEvalUpdated       = "EvaluationUpdated"
	EventEvalDeleted       = "EvaluationDeleted"
	// Service registrations, as Nomad names them.
	EventServiceRegistration   = "ServiceRegistration"
	EventServiceDeregistration = "ServiceDeregistration"
	// Job versions and deployments: any change of a deployment (status,
	// counters, promotion), as Nomad's.
	EventDeploymentStatusUpdate = "DeploymentStatusUpdate"
	EventDeploymentDeleted      = "DeploymentDeleted"
	// Endpoint aliases: a promotion (a new alias, or one moved to another
	// endpoint) and a demotion (the alias removed).
	EventEndpointAliasPromoted = "EndpointAliasPromoted"
	EventEndpointAliasDemoted  = "EndpointAliasDemoted"
)

// Event is one change to the cluster state, published by the state store
// when the write transaction of a Raft entry commits. Events are immutable
// once published: readers must not change them or their payload.
type Event struct {
	Topic string
	Type  string
	// Key is the ID of the changed object.
	Key string
	// FilterKeys are further keys a subscription may match: an
	// allocation's job ID and node ID, an evaluation's job ID.
	FilterKeys []string `json:",omitempty"`
	// Index is the Raft index of the log entry that made the change.
	Index   uint64
	Payload EventPayload
}

// EventPayload holds the object after the change (before it, for a
// delete). Exactly one field is set. An Allocation payload carries no Job
// (look it up by JobID), to keep events small.
type EventPayload struct {
	Job        *Job        `json:",omitempty"`
	Allocation *Allocation `json:",omitempty"`
	Node       *Node       `json:",omitempty"`
	Evaluation *Evaluation `json:",omitempty"`
	// Service is a service registration (TopicService).
	Service    *ServiceRegistration `json:",omitempty"`
	Deployment *Deployment          `json:",omitempty"`
	// EndpointAlias is an alias after its promotion, or before its
	// demotion (TopicEndpointAlias).
	EndpointAlias *EndpointAlias `json:",omitempty"`
}

// EventBatch is every event of one Raft index, in the order the write made
// them.
type EventBatch struct {
	Index  uint64
	Events []*Event
}

// EventTopics filters events: a map from topic (or TopicAll) to the keys
// wanted, matched against an event's Key and FilterKeys, where a key "*"
// or an empty list means every key. A nil or empty
// map wants everything.
type EventTopics map[string][]string

// Matches reports whether e passes the filter.
func (t EventTopics) Matches(e *Event) bool {
	if len(t) == 0 {
		return true
	}
	for _, topic := range []string{e.Topic, TopicAll} {
		keys, ok := t[topic]
		if !ok {
			continue
		}
		if len(keys) == 0 {
			return true
		}
		for _, k := range keys {
			if k == "*" || k == e.Key {
				return true
			}
			for _, fk := range e.FilterKeys {
				if k == fk {
					return true
				}
			}
		}
	}
	return false
}

// ParseEventTopics reads topic filters of the form "Topic" or "Topic:key"
// (Nomad's ?topic=Job:example); "*" as the topic means every topic and as
// the key every key. It returns an error wrapping ErrInvalid that names the
// bad value for an unknown topic or an empty key.
func ParseEventTopics(values []string) (EventTopics, error) {
	out := EventTopics{}
	for _, v := range values {
		topic, key, hasKey := strings.Cut(v, ":")
		switch topic {
		case TopicJob, TopicAllocation, TopicNode, TopicEvaluation, TopicDeployment, TopicAll:
		// Service registrations.
		case TopicService, TopicEndpointAlias:
		default:
			return nil, fmt.Errorf("%w: topic %q: want one of Job, Allocation, Node, Evaluation, Deployment, Service, EndpointAlias or *", ErrInvalid, v)
		}
		if hasKey && key == "" {
			return nil, fmt.Errorf("%w: topic %q: empty key after ':'; want \"Topic:key\" or \"Topic\"", ErrInvalid, v)
		}
		if !hasKey {
			key = "*"
		}
		out[topic] = append(out[topic], key)
	}
	return out, nil
}
