package jobspec

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// Nomad's job `periodic` and `parameterized` blocks, the job's
// max_running_children, and the task's `dispatch_payload` block. Their
// values (cron syntax, payload mode, meta keys, file) are checked by the
// job's Validate, whose problems `job run` shows at the field's file:line.
var (
	periodicSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "cron"}, {Name: "crons"}, {Name: "prohibit_overlap"}, {Name: "time_zone"}, {Name: "enabled"},
		},
	}
	parameterizedSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "payload"}, {Name: "meta_required"}, {Name: "meta_optional"}},
	}
	dispatchPayloadSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "file", Required: true}},
	}
)

// periodic decodes a periodic block; enabled defaults to true, as in
// Nomad.
func (d *decoder) periodic(block *hcl.Block) *api.PeriodicConfig {
	c := d.content(block.Body, periodicSchema)
	enabled := true
	p := &api.PeriodicConfig{SpecType: "cron", Enabled: &enabled}
	d.str(c.Attributes["cron"], &p.Spec)
	d.strList(c.Attributes["crons"], &p.Specs)
	d.boolean(c.Attributes["prohibit_overlap"], &p.ProhibitOverlap)
	d.str(c.Attributes["time_zone"], &p.TimeZone)
	d.boolean(c.Attributes["enabled"], p.Enabled)
	return p
}

// parameterized decodes a parameterized block; payload defaults to
// "optional".
func (d *decoder) parameterized(block *hcl.Block) *api.ParameterizedJobConfig {
	c := d.content(block.Body, parameterizedSchema)
	p := &api.ParameterizedJobConfig{Payload: "optional"}
	d.str(c.Attributes["payload"], &p.Payload)
	d.strList(c.Attributes["meta_required"], &p.MetaRequired)
	d.strList(c.Attributes["meta_optional"], &p.MetaOptional)
	return p
}

// dispatchPayload decodes a task's dispatch_payload block.
func (d *decoder) dispatchPayload(block *hcl.Block) *api.DispatchPayloadConfig {
	c := d.content(block.Body, dispatchPayloadSchema)
	p := &api.DispatchPayloadConfig{}
	d.str(c.Attributes["file"], &p.File)
	return p
}
