package jobspec

import (
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// updateSchema is Nomad's `update` block (job or group level), plus
// max_unavailable: 0 brings each new copy up before an old one stops.
var updateSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "max_parallel"}, {Name: "health_check"}, {Name: "min_healthy_time"}, {Name: "healthy_deadline"},
		{Name: "progress_deadline"}, {Name: "auto_revert"}, {Name: "auto_promote"}, {Name: "canary"},
		{Name: "max_unavailable"}, {Name: "stagger"},
	},
}

// defaultUpdateMaxParallel is Nomad's max_parallel when an update block
// leaves it out.
const defaultUpdateMaxParallel = 1

// update decodes one update block. Its values are checked by the job's
// Validate (health_check, durations, canary against count), which names
// the field so the CLI can point at its line.
func (d *decoder) update(block *hcl.Block) *api.UpdateStrategy {
	c := d.content(block.Body, updateSchema)
	u := &api.UpdateStrategy{MaxParallel: defaultUpdateMaxParallel}
	d.integer(c.Attributes["max_parallel"], &u.MaxParallel)
	d.str(c.Attributes["health_check"], &u.HealthCheck)
	d.duration(c.Attributes["min_healthy_time"], &u.MinHealthyTime)
	d.duration(c.Attributes["healthy_deadline"], &u.HealthyDeadline)
	d.duration(c.Attributes["progress_deadline"], &u.ProgressDeadline)
	d.boolean(c.Attributes["auto_revert"], &u.AutoRevert)
	d.boolean(c.Attributes["auto_promote"], &u.AutoPromote)
	d.integer(c.Attributes["canary"], &u.Canary)
	var mu int
	if d.integer(c.Attributes["max_unavailable"], &mu) {
		u.MaxUnavailable = &mu
	}
	// stagger is accepted for Nomad jobspecs and has no effect here
	// (allocations are replaced as soon as the previous ones are healthy).
	var stagger time.Duration
	d.duration(c.Attributes["stagger"], &stagger)
	return u
}
