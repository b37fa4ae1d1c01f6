package structs

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	// Time zones load from the binary, so every server reads a periodic
	// job's time_zone the same way whatever the host has installed.
	_ "time/tzdata"

	"github.com/hashicorp/cronexpr"
)

// Periodic and parameterized jobs (Nomad's `periodic` and `parameterized`
// blocks) are parents: they never get allocations themselves. The leader
// launches a periodic job's children on its cron schedule, and `job
// dispatch` creates a parameterized job's children. A child is a copy of
// its parent with ID "<parent>/periodic-<unix seconds>" or
// "<parent>/dispatch-<unix seconds>-<8 hex>", ParentID set, and Name equal
// to its ID, as in Nomad.

// PeriodicSpecCron is the only PeriodicConfig.SpecType.
const PeriodicSpecCron = "cron"

// Parameterized payload modes (ParameterizedJobConfig.Payload).
const (
	DispatchPayloadOptional  = "optional"
	DispatchPayloadRequired  = "required"
	DispatchPayloadForbidden = "forbidden"
)

// Limits of periodic and parameterized jobs.
const (
	// MaxDispatchPayload is the largest dispatch payload: 16 KiB, Nomad's
	// DispatchPayloadSizeLimit. The payload travels in the Raft log.
	MaxDispatchPayload = 16 * 1024
	// MaxPeriodicSpecs caps a periodic block's crons.
	MaxPeriodicSpecs = 32
	// MaxCronLength caps one cron expression, in bytes.
	MaxCronLength = 256
	// MaxParameterizedMetaKeys caps meta_required plus meta_optional, and
	// the meta of one dispatch.
	MaxParameterizedMetaKeys = 64
	// MaxIdempotencyTokenLength caps a dispatch's idempotency token.
	MaxIdempotencyTokenLength = 256
	// MaxRunningChildrenLimit is the largest max_running_children.
	MaxRunningChildrenLimit = 100_000
	// MaxHeldChildren is how many children of one parent may wait held
	// (max_running_children) at once, the default of the server's
	// Config.MaxHeldChildren. Held children are never garbage-collected,
	// so without it a cron firing every second behind a long-running
	// child would add 86,400 jobs a day.
	MaxHeldChildren = 10_000
	// maxDispatchFileLength caps dispatch_payload's file, in bytes.
	maxDispatchFileLength = 256
)

// PeriodicConfig is Nomad's `periodic` block: the leader launches a child
// at each time one of the cron expressions names.
type PeriodicConfig struct {
	// Enabled launches children; a disabled periodic job is kept but
	// launches none (a forced launch still works).
	Enabled bool
	// Spec is the older singular `cron`; Specs is `crons`. One of them is
	// set, not both.
	Spec  string
	Specs []string
	// SpecType is "cron".
	SpecType string
	// ProhibitOverlap skips a scheduled launch while a child of the job
	// is not dead (held children included).
	ProhibitOverlap bool
	// TimeZone is an IANA zone name the crons are read in; empty is UTC.
	TimeZone string
}

// ParameterizedJobConfig is Nomad's `parameterized` block.
type ParameterizedJobConfig struct {
	// Payload is "optional" (the default), "required" or "forbidden".
	Payload string
	// MetaRequired are the meta keys every dispatch must give.
	MetaRequired []string
	// MetaOptional are the other meta keys a dispatch may give.
	MetaOptional []string
}

// DispatchPayloadConfig is a task's `dispatch_payload` block: the
// dispatched payload is written to File beneath the task's local/
// directory.
type DispatchPayloadConfig struct {
	File string
}

// AllSpecs returns Spec and Specs as one list.
func (p *PeriodicConfig) AllSpecs() []string {
	if p == nil {
		return nil
	}
	out := slices.Clone(p.Specs)
	if p.Spec != "" {
		out = append([]string{p.Spec}, out...)
	}
	return out
}

// Location returns the time zone of the crons; an unknown zone is an error.
func (p *PeriodicConfig) Location() (*time.Location, error) {
	if p == nil || p.TimeZone == "" {
		return time.UTC, nil
	}
	if p.TimeZone == "Local" {
		// LoadLocation's "Local" is the zone of the host that reads it:
		// each leader would launch at other times.
		return nil, fmt.Errorf("time zone %q is the host's own; name the zone (e.g. \"Europe/Berlin\")", p.TimeZone)
	}
	return time.LoadLocation(p.TimeZone)
}

// parseCron parses one cron expression with hashicorp/cronexpr, Nomad's
// parser (five to seven fields, seconds and years optional, @hourly and
// friends), and never panics.
func parseCron(spec string) (expr *cronexpr.Expression, err error) {
	defer func() {
		if r := recover(); r != nil {
			expr, err = nil, fmt.Errorf("cannot parse: %v", r)
		}
	}()
	if len(spec) > MaxCronLength {
		return nil, fmt.Errorf("at most %d bytes, got %d", MaxCronLength, len(spec))
	}
	return cronexpr.Parse(spec)
}

// Next returns the earliest launch time strictly after after, over all
// the crons, in Unix seconds precision; the zero time when no cron names
// a later time. Errors are those of a bad cron or time zone (Validate
// refuses both).
func (p *PeriodicConfig) Next(after time.Time) (time.Time, error) {
	loc, err := p.Location()
	if err != nil {
		return time.Time{}, err
	}
	var best time.Time
	for _, s := range p.AllSpecs() {
		e, err := parseCron(s)
		if err != nil {
			return time.Time{}, fmt.Errorf("cron %q: %w", s, err)
		}
		n := e.Next(after.In(loc))
		if !n.IsZero() && (best.IsZero() || n.Before(best)) {
			best = n
		}
	}
	return best, nil
}

// periodicProblems names what is wrong with a periodic block.
func (p *PeriodicConfig) problems() []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	if p.SpecType != PeriodicSpecCron {
		add("periodic: spec_type: must be %q, got %q", PeriodicSpecCron, p.SpecType)
	}
	switch {
	case p.Spec != "" && len(p.Specs) > 0:
		add("periodic: cron and crons: give one of them, not both")
	case p.Spec == "" && len(p.Specs) == 0:
		add("periodic: crons: at least one cron expression is required")
	case len(p.Specs) > MaxPeriodicSpecs:
		add("periodic: crons: at most %d, got %d", MaxPeriodicSpecs, len(p.Specs))
	}
	check := func(field, s string) {
		if _, err := parseCron(s); err != nil {
			add("periodic: %s: %q is not a cron expression: %v", field, clip(s), err)
		}
	}
	if p.Spec != "" {
		check("cron", p.Spec)
	}
	if len(p.Specs) <= MaxPeriodicSpecs {
		for _, s := range p.Specs {
			check("crons", s)
		}
	}
	if _, err := p.Location(); err != nil {
		if p.TimeZone == "Local" {
			add("periodic: time_zone: %q is each server's own zone, so a new leader would launch at other times; name the zone, e.g. \"America/New_York\"", p.TimeZone)
		} else {
			add("periodic: time_zone: unknown time zone %q", clip(p.TimeZone))
		}
	}
	return out
}

// problems names what is wrong with a parameterized block.
func (p *ParameterizedJobConfig) problems() []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	switch p.Payload {
	case DispatchPayloadOptional, DispatchPayloadRequired, DispatchPayloadForbidden:
	default:
		add("parameterized: payload: must be %q, %q or %q, got %q", DispatchPayloadOptional, DispatchPayloadRequired,
			DispatchPayloadForbidden, clip(p.Payload))
	}
	if n := len(p.MetaRequired) + len(p.MetaOptional); n > MaxParameterizedMetaKeys {
		add("parameterized: meta_required and meta_optional: at most %d keys in all, got %d", MaxParameterizedMetaKeys, n)
		return out
	}
	seen := map[string]bool{}
	for field, keys := range map[string][]string{"meta_required": p.MetaRequired, "meta_optional": p.MetaOptional} {
		for _, k := range keys {
			if !validMetaKey(k) {
				add("parameterized: %s: key %q: must be 1-%d bytes without spaces, control characters or '='", field, clip(k), MaxNameLength)
			}
			if seen[k] {
				add("parameterized: %s: key %q is listed twice", field, clip(k))
			}
			seen[k] = true
		}
	}
	slices.Sort(out) // map order above
	return out
}

// childIDSuffix is what follows "<parent>/" in a child's ID.
var childIDSuffix = regexp.MustCompile(`^(periodic-[0-9]{1,12}|dispatch-[0-9]{1,12}-[0-9a-f]{8})$`)

// validJobID reports whether id is a job ID: a name (validName), or, for a
// child of parentID, "<parentID>/periodic-<n>" or "<parentID>/dispatch-<n>-<hex>".
func validJobID(id, parentID string) bool {
	if parentID == "" {
		return validName.MatchString(id)
	}
	rest, ok := strings.CutPrefix(id, parentID+"/")
	return ok && validName.MatchString(parentID) && childIDSuffix.MatchString(rest)
}

// IsPeriodic reports whether j is a periodic parent job.
func (j *Job) IsPeriodic() bool { return j != nil && j.Periodic != nil && j.ParentID == "" }

// IsPeriodicActive reports whether the leader launches j's children on
// schedule: periodic, enabled and not stopped.
func (j *Job) IsPeriodicActive() bool { return j.IsPeriodic() && j.Periodic.Enabled && !j.Stop }

// IsParameterized reports whether j is a parameterized parent job (a
// dispatched child keeps its parent's block but is not one).
func (j *Job) IsParameterized() bool { return j != nil && j.ParameterizedJob != nil && !j.Dispatched }

// IsParent reports whether j is a periodic or parameterized parent, which
// is never given allocations.
func (j *Job) IsParent() bool { return j.IsPeriodic() || j.IsParameterized() }

// PlacesNothing reports whether the scheduler places nothing for j and
// stops what it has: a stopped job, a parent job, or a child held by its
// parent's max_running_children.
func (j *Job) PlacesNothing() bool { return j.Stop || j.IsParent() || j.Held }

// PeriodicChildID is the ID of j's child launched for the time t (Unix
// seconds): "<j.ID>/periodic-<t>".
func PeriodicChildID(parentID string, t int64) string {
	return fmt.Sprintf("%s/periodic-%d", parentID, t)
}

// DispatchChildID is the ID of a dispatched child of parentID created at t
// (Unix seconds), with the first 8 hex digits of a random UUID:
// "<parent>/dispatch-<t>-<hex>".
func DispatchChildID(parentID string, t int64, uuid string) string {
	return fmt.Sprintf("%s/dispatch-%d-%s", parentID, t, strings.ReplaceAll(uuid, "-", "")[:8])
}

// NewChild returns a copy of parent made into a child with the given ID:
// ParentID set, Name the ID, status, indexes and version cleared, no
// periodic block or children limit, and not stopped.
func (j *Job) NewChild(id string) *Job {
	c := j.Copy()
	c.ID, c.Name, c.ParentID = id, id, j.ID
	c.Periodic = nil
	c.MaxRunningChildren = 0
	c.Stop, c.Held = false, false
	c.Status, c.StatusDescription = "", ""
	c.Version, c.CreateIndex, c.ModifyIndex, c.JobModifyIndex = 0, 0, 0, 0
	return c
}

// childrenProblems names what is wrong with j's periodic, parameterized,
// max_running_children and dispatch_payload fields.
func (j *Job) childrenProblems() []string {
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if j.Periodic != nil && j.ParentID == "" {
		p = append(p, j.Periodic.problems()...)
	}
	if j.ParameterizedJob != nil {
		p = append(p, j.ParameterizedJob.problems()...)
	}
	if j.IsPeriodic() && j.ParameterizedJob != nil {
		add("periodic: a job cannot be both periodic and parameterized")
	}
	if j.IsParent() && j.Type != JobTypeBatch {
		kind := "parameterized"
		if j.IsPeriodic() {
			kind = "periodic"
		}
		add("type: a %s job must be %q, got %q", kind, JobTypeBatch, j.Type)
	}
	switch {
	case j.MaxRunningChildren < 0 || j.MaxRunningChildren > MaxRunningChildrenLimit:
		add("max_running_children: must be between 0 (no limit) and %d, got %d", MaxRunningChildrenLimit, j.MaxRunningChildren)
	case j.MaxRunningChildren > 0 && !j.IsParent():
		add("max_running_children: only a periodic or parameterized job has children to limit")
	}
	if len(j.Payload) > MaxDispatchPayload {
		add("payload: at most %d bytes, got %d", MaxDispatchPayload, len(j.Payload))
	}
	if len(j.DispatchIdempotencyToken) > MaxIdempotencyTokenLength {
		add("idempotency_token: at most %d bytes, got %d", MaxIdempotencyTokenLength, len(j.DispatchIdempotencyToken))
	}
	for _, tg := range j.TaskGroups {
		if tg == nil {
			continue
		}
		for _, t := range tg.Tasks {
			if t == nil || t.DispatchPayload == nil {
				continue
			}
			if msg := dispatchFileProblem(t.DispatchPayload.File); msg != "" {
				add("group %q: task %q: dispatch_payload: file: %s", tg.Name, t.Name, msg)
			}
		}
	}
	return p
}

// dispatchFileProblem returns the problem of a dispatch_payload file, or "".
func dispatchFileProblem(f string) string {
	switch {
	case f == "":
		return "is required"
	case len(f) > maxDispatchFileLength:
		return fmt.Sprintf("at most %d bytes, got %d", maxDispatchFileLength, len(f))
	case strings.ContainsRune(f, 0) || strings.HasPrefix(f, "/") || path.Clean(f) != f || f == "." ||
		f == ".." || strings.HasPrefix(f, "../"):
		return fmt.Sprintf("%q must be a clean relative path inside local/", clip(f))
	}
	return ""
}

// DispatchProblems checks a dispatch of the parameterized job j: payload
// against its payload mode and MaxDispatchPayload, meta against
// meta_required and meta_optional, and the token's length. It returns a
// *ValidationError (ErrInvalid) naming each problem, or nil.
func (j *Job) DispatchProblems(payload []byte, meta map[string]string, token string) error {
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if !j.IsParameterized() {
		return &ValidationError{Problems: []string{fmt.Sprintf("job %q is not a parameterized job; only a job with a parameterized block can be dispatched", j.ID)}}
	}
	cfg := j.ParameterizedJob
	switch {
	case len(payload) > MaxDispatchPayload:
		add("Payload: at most %d bytes, got %d", MaxDispatchPayload, len(payload))
	case cfg.Payload == DispatchPayloadRequired && len(payload) == 0:
		add("Payload: job %q requires a payload", j.ID)
	case cfg.Payload == DispatchPayloadForbidden && len(payload) > 0:
		add("Payload: job %q forbids a payload", j.ID)
	}
	if len(meta) > MaxParameterizedMetaKeys {
		// One problem per key would make the answer as large as the
		// request: the count says it all.
		add("Meta: at most %d keys, got %d", MaxParameterizedMetaKeys, len(meta))
		return &ValidationError{Problems: p}
	}
	for _, k := range cfg.MetaRequired {
		if _, ok := meta[k]; !ok {
			add("Meta: missing required key %q", clip(k))
		}
	}
	for _, k := range sortedKeys(meta) {
		if !slices.Contains(cfg.MetaRequired, k) && !slices.Contains(cfg.MetaOptional, k) {
			add("Meta: key %q is neither in meta_required nor in meta_optional", clip(k))
		}
	}
	p = append(p, envMapProblems("Meta", meta)...)
	if len(token) > MaxIdempotencyTokenLength {
		add("IdempotencyToken: at most %d bytes, got %d", MaxIdempotencyTokenLength, len(token))
	}
	if len(p) == 0 {
		return nil
	}
	return &ValidationError{Problems: p}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// canonicalizeChildren fills the periodic and parameterized defaults:
// spec_type "cron", payload "optional".
func (j *Job) canonicalizeChildren() {
	if p := j.Periodic; p != nil && p.SpecType == "" {
		p.SpecType = PeriodicSpecCron
	}
	if p := j.ParameterizedJob; p != nil && p.Payload == "" {
		p.Payload = DispatchPayloadOptional
	}
}

func (p *PeriodicConfig) copy() *PeriodicConfig {
	if p == nil {
		return nil
	}
	n := *p
	n.Specs = slices.Clone(p.Specs)
	return &n
}

func (p *ParameterizedJobConfig) copy() *ParameterizedJobConfig {
	if p == nil {
		return nil
	}
	n := *p
	n.MetaRequired = slices.Clone(p.MetaRequired)
	n.MetaOptional = slices.Clone(p.MetaOptional)
	return &n
}

// ChildLaunchResult is the FSM's answer to a PeriodicLaunchRequest or a
// JobDispatchRequest.
type ChildLaunchResult struct {
	// JobID is the child's ID: the one created, or the existing child the
	// entry named again (same launch time, or same idempotency token).
	JobID string
	// Created is true when the entry registered the child.
	Created bool
	// Held is true when the child waits for a running sibling to finish
	// (max_running_children); it has no evaluation yet.
	Held bool
	// Skipped says why a scheduled launch created nothing (prohibit_overlap,
	// or the time was decided before); empty otherwise.
	Skipped string
}

// PeriodicLaunch records the last scheduled launch time the leader decided
// for a periodic job (Nomad's periodic_launch table), so a new leader
// neither launches that time again nor skips the next one.
type PeriodicLaunch struct {
	// ID is the periodic job's ID.
	ID        string
	Namespace string
	// Launch is the last decided cron time, in Unix seconds.
	Launch      int64
	CreateIndex uint64
	ModifyIndex uint64
}
