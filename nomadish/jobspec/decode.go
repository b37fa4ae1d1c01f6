package jobspec

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Defaults the parser fills, as in Nomad.
const (
	defaultJobType     = api.JobTypeService
	defaultPriority    = 50
	defaultDatacenter  = "dc1"
	defaultGroupCount  = 1
	defaultDeviceCount = 1
	// defaultCPU (MHz) and defaultMemoryMB (MiB) fill a resources block
	// that leaves cpu or memory out (api.DefaultCPU, api.DefaultMemoryMB,
	// Nomad's defaults); structs.Job.Canonicalize gives the same to a task
	// with no resources block at all.
	defaultCPU            = api.DefaultCPU
	defaultMemoryMB       = api.DefaultMemoryMB
	defaultOperand        = "="
	defaultAffinityWeight = 50
)

var (
	constraintSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "attribute"}, {Name: "operator"}, {Name: "value"}},
	}
	affinitySchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "attribute"}, {Name: "operator"}, {Name: "value"}, {Name: "weight"}},
	}
	jobSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "type"}, {Name: "priority"}, {Name: "datacenters"}, {Name: "namespace"}, {Name: "meta"},
			{Name: "requires"}, {Name: "availability"},
			// Periodic and parameterized jobs (children.go).
			{Name: "max_running_children"},
			// Node pools (Nomad's node_pool).
			{Name: "node_pool"},
		},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "meta"}, {Type: "constraint"}, {Type: "affinity"}, {Type: "update"},
			{Type: "group", LabelNames: []string{"name"}},
			// Periodic and parameterized jobs (children.go).
			{Type: "periodic"}, {Type: "parameterized"},
		},
	}
	groupSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "count"}, {Name: "meta"}, {Name: "gang"}, {Name: "requires"}, {Name: "availability"},
			{Name: "max_run_duration"}, {Name: "shutdown_delay"}},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "meta"}, {Type: "constraint"}, {Type: "affinity"}, {Type: "restart"},
			{Type: "reschedule"}, {Type: "update"},
			{Type: "task", LabelNames: []string{"name"}},
			// Ports and services (services.go).
			{Type: "network"}, {Type: "service"},
			// The same-host model-serving endpoint (endpoint.go).
			{Type: "endpoint"},
		},
	}
	restartSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "attempts"}, {Name: "delay"}, {Name: "interval"}, {Name: "mode"}},
	}
	rescheduleSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "attempts"}, {Name: "interval"}, {Name: "unlimited"}, {Name: "delay"},
			{Name: "delay_function"}, {Name: "max_delay"}},
	}
	taskSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "driver"}, {Name: "kill_timeout"}, {Name: "kill_signal"}, {Name: "user"},
			{Name: "config"}, {Name: "env"}, {Name: "meta"},
			{Name: "max_run_duration"}, {Name: "shutdown_delay"},
		},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "config"}, {Type: "env"}, {Type: "meta"}, {Type: "resources"},
			{Type: "constraint"}, {Type: "affinity"}, {Type: "artifact"},
			{Type: "service"},
			{Type: "dispatch_payload"},
		},
	}
	resourcesSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "cpu"}, {Name: "memory"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "device", LabelNames: []string{"name"}}},
	}
	deviceSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "count"}, {Name: "memory"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "constraint"}, {Type: "affinity"}},
	}
)

// decoder turns evaluated blocks into api values, collecting diagnostics.
// An attribute whose value is null counts as absent.
type decoder struct {
	ctx   *hcl.EvalContext
	diags hcl.Diagnostics
	// budget is charged with every attribute value (see MaxEvalWork).
	budget *budget
}

func (d *decoder) content(body hcl.Body, schema *hcl.BodySchema) *hcl.BodyContent {
	content, diags := body.Content(schema)
	d.diags = append(d.diags, diags...)
	return content
}

func (d *decoder) job(block *hcl.Block) *api.Job {
	c := d.content(block.Body, jobSchema)
	job := &api.Job{
		ID:          block.Labels[0],
		Name:        block.Labels[0],
		Type:        defaultJobType,
		Priority:    defaultPriority,
		Datacenters: []string{defaultDatacenter},
	}
	d.str(c.Attributes["type"], &job.Type)
	d.str(c.Attributes["namespace"], &job.Namespace)
	d.str(c.Attributes["node_pool"], &job.NodePool)
	d.integer(c.Attributes["priority"], &job.Priority)
	d.strList(c.Attributes["datacenters"], &job.Datacenters)
	job.Meta = d.stringMap("meta", c)
	d.strList(c.Attributes["requires"], &job.Requires)
	d.availability(c.Attributes["availability"], &job.Availability)
	d.integer(c.Attributes["max_running_children"], &job.MaxRunningChildren)
	for _, b := range c.Blocks {
		switch b.Type {
		case "constraint":
			job.Constraints = append(job.Constraints, d.constraint(b))
		case "affinity":
			job.Affinities = append(job.Affinities, d.affinity(b))
		case "group":
			job.TaskGroups = append(job.TaskGroups, d.group(b))
		case "update":
			if job.Update != nil {
				d.duplicateBlock(b)
				continue
			}
			job.Update = d.update(b)
		case "periodic":
			if job.Periodic != nil {
				d.duplicateBlock(b)
				continue
			}
			job.Periodic = d.periodic(b)
		case "parameterized":
			if job.ParameterizedJob != nil {
				d.duplicateBlock(b)
				continue
			}
			job.ParameterizedJob = d.parameterized(b)
		}
	}
	return job
}

func (d *decoder) group(block *hcl.Block) *api.TaskGroup {
	c := d.content(block.Body, groupSchema)
	tg := &api.TaskGroup{Name: block.Labels[0], Count: defaultGroupCount}
	d.integer(c.Attributes["count"], &tg.Count)
	tg.Meta = d.stringMap("meta", c)
	d.boolean(c.Attributes["gang"], &tg.Gang)
	d.strList(c.Attributes["requires"], &tg.Requires)
	d.availability(c.Attributes["availability"], &tg.Availability)
	ports := map[string]hcl.Range{}
	d.maxRunDuration(c.Attributes["max_run_duration"], &tg.MaxRunDuration)
	d.shutdownDelay(c.Attributes["shutdown_delay"], &tg.ShutdownDelay)
	for _, b := range c.Blocks {
		switch b.Type {
		case "network":
			if len(tg.Networks) > 0 {
				d.duplicateBlock(b)
				continue
			}
			tg.Networks = append(tg.Networks, d.network(b, ports))
		case "service":
			tg.Services = append(tg.Services, d.service(b))
		case "constraint":
			tg.Constraints = append(tg.Constraints, d.constraint(b))
		case "affinity":
			tg.Affinities = append(tg.Affinities, d.affinity(b))
		case "restart":
			if tg.RestartPolicy != nil {
				d.duplicateBlock(b)
				continue
			}
			tg.RestartPolicy = d.restart(b)
		case "reschedule":
			if tg.ReschedulePolicy != nil {
				d.duplicateBlock(b)
				continue
			}
			tg.ReschedulePolicy = d.reschedule(b)
		case "update":
			if tg.Update != nil {
				d.duplicateBlock(b)
				continue
			}
			tg.Update = d.update(b)
		case "task":
			tg.Tasks = append(tg.Tasks, d.task(b))
		case "endpoint":
			if tg.Endpoint != nil {
				d.duplicateBlock(b)
				continue
			}
			tg.Endpoint = d.endpoint(b)
		}
	}
	return tg
}

func (d *decoder) restart(block *hcl.Block) *api.RestartPolicy {
	c := d.content(block.Body, restartSchema)
	rp := &api.RestartPolicy{}
	d.integer(c.Attributes["attempts"], &rp.Attempts)
	d.duration(c.Attributes["delay"], &rp.Delay)
	d.duration(c.Attributes["interval"], &rp.Interval)
	d.str(c.Attributes["mode"], &rp.Mode)
	return rp
}

func (d *decoder) reschedule(block *hcl.Block) *api.ReschedulePolicy {
	c := d.content(block.Body, rescheduleSchema)
	rs := &api.ReschedulePolicy{}
	d.integer(c.Attributes["attempts"], &rs.Attempts)
	d.duration(c.Attributes["interval"], &rs.Interval)
	d.boolean(c.Attributes["unlimited"], &rs.Unlimited)
	d.duration(c.Attributes["delay"], &rs.Delay)
	d.str(c.Attributes["delay_function"], &rs.DelayFunction)
	d.duration(c.Attributes["max_delay"], &rs.MaxDelay)
	return rs
}

func (d *decoder) task(block *hcl.Block) *api.Task {
	c := d.content(block.Body, taskSchema)
	t := &api.Task{Name: block.Labels[0]}
	d.str(c.Attributes["driver"], &t.Driver)
	d.str(c.Attributes["kill_signal"], &t.KillSignal)
	d.str(c.Attributes["user"], &t.User)
	d.duration(c.Attributes["kill_timeout"], &t.KillTimeout)
	d.maxRunDuration(c.Attributes["max_run_duration"], &t.MaxRunDuration)
	d.shutdownDelay(c.Attributes["shutdown_delay"], &t.ShutdownDelay)
	t.Config = d.config(c)
	t.Env = d.stringMap("env", c)
	t.Meta = d.stringMap("meta", c)
	for _, b := range c.Blocks {
		switch b.Type {
		case "constraint":
			t.Constraints = append(t.Constraints, d.constraint(b))
		case "affinity":
			t.Affinities = append(t.Affinities, d.affinity(b))
		case "resources":
			if t.Resources != nil {
				d.duplicateBlock(b)
				continue
			}
			t.Resources = d.resources(b)
		case "artifact":
			t.Artifacts = append(t.Artifacts, d.artifact(b))
		case "service":
			t.Services = append(t.Services, d.service(b))
		case "dispatch_payload":
			if t.DispatchPayload != nil {
				d.duplicateBlock(b)
				continue
			}
			t.DispatchPayload = d.dispatchPayload(b)
		}
	}
	return t
}

func (d *decoder) resources(block *hcl.Block) *api.Resources {
	c := d.content(block.Body, resourcesSchema)
	r := &api.Resources{CPU: defaultCPU, MemoryMB: defaultMemoryMB}
	d.integer(c.Attributes["cpu"], &r.CPU)
	d.integer(c.Attributes["memory"], &r.MemoryMB)
	for _, b := range c.Blocks {
		r.Devices = append(r.Devices, d.device(b))
	}
	return r
}

func (d *decoder) device(block *hcl.Block) *api.RequestedDevice {
	c := d.content(block.Body, deviceSchema)
	dev := &api.RequestedDevice{Name: block.Labels[0], Count: defaultDeviceCount}
	if attr := c.Attributes["count"]; d.integer(attr, &dev.Count) && dev.Count < 0 {
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid device count",
			Detail:   fmt.Sprintf("The count of device %q must not be negative; got %d.", dev.Name, dev.Count),
			Subject:  attr.Expr.Range().Ptr(),
		})
	}
	d.memoryMiB(c.Attributes["memory"], &dev.MemoryMB)
	for _, b := range c.Blocks {
		switch b.Type {
		case "constraint":
			dev.Constraints = append(dev.Constraints, d.constraint(b))
		case "affinity":
			dev.Affinities = append(dev.Affinities, d.affinity(b))
		}
	}
	return dev
}

func (d *decoder) constraint(block *hcl.Block) *api.Constraint {
	c := d.content(block.Body, constraintSchema)
	con := &api.Constraint{Operand: defaultOperand}
	d.str(c.Attributes["attribute"], &con.LTarget)
	d.str(c.Attributes["operator"], &con.Operand)
	d.str(c.Attributes["value"], &con.RTarget)
	return con
}

func (d *decoder) affinity(block *hcl.Block) *api.Affinity {
	c := d.content(block.Body, affinitySchema)
	a := &api.Affinity{Operand: defaultOperand, Weight: defaultAffinityWeight}
	d.str(c.Attributes["attribute"], &a.LTarget)
	d.str(c.Attributes["operator"], &a.Operand)
	d.str(c.Attributes["value"], &a.RTarget)
	d.integer(c.Attributes["weight"], &a.Weight)
	return a
}

func (d *decoder) duplicateBlock(b *hcl.Block) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Duplicate " + b.Type + " block",
		Detail:   fmt.Sprintf("Only one %s block is allowed here.", b.Type),
		Subject:  b.DefRange.Ptr(),
	})
}

// value evaluates attr converted to ty. It returns false when attr is nil,
// null, or wrong (then with a diagnostic naming the attribute).
func (d *decoder) value(attr *hcl.Attribute, ty cty.Type) (cty.Value, bool) {
	if attr == nil {
		return cty.NilVal, false
	}
	v, diags := attr.Expr.Value(d.ctx)
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() {
		return cty.NilVal, false
	}
	// The value becomes Go values and JSON: charge it, so a value that
	// shares one big local many times over is refused, not copied.
	if d.budget != nil {
		if err := d.budget.charge(v); err != nil {
			d.diags = append(d.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Value too large", Detail: err.Error() + ".",
				Subject: attr.Expr.Range().Ptr(),
			})
			return cty.NilVal, false
		}
	}
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return cty.NilVal, false
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		d.diags = append(d.diags, typeDiag(attr.Name, attr.Expr.Range(), err))
		return cty.NilVal, false
	}
	if !cv.IsWhollyKnown() {
		d.diags = append(d.diags, typeDiag(attr.Name, attr.Expr.Range(), fmt.Errorf("the value is not known until the job runs")))
		return cty.NilVal, false
	}
	return cv, true
}

// typeDiag reports a value of attribute name, at rng, that does not fit.
func typeDiag(name string, rng hcl.Range, err error) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Incorrect attribute value type",
		Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s.", name, err),
		Subject:  rng.Ptr(),
	}
}

func (d *decoder) str(attr *hcl.Attribute, dst *string) bool {
	v, ok := d.value(attr, cty.String)
	if ok {
		*dst = v.AsString()
	}
	return ok
}

// integer decodes a whole number that fits in an int.
func (d *decoder) integer(attr *hcl.Attribute, dst *int) bool {
	v, ok := d.value(attr, cty.Number)
	if !ok {
		return false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		d.diags = append(d.diags, typeDiag(attr.Name, attr.Expr.Range(), fmt.Errorf("a whole number is required, got %s", bf.Text('g', 10))))
		return false
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i < math.MinInt32 || i > math.MaxInt32 {
		d.diags = append(d.diags, typeDiag(attr.Name, attr.Expr.Range(), fmt.Errorf("the number %s is out of range", bf.Text('g', 10))))
		return false
	}
	*dst = int(i)
	return true
}

// duration decodes a Go duration string such as "5s" or "1m30s".
func (d *decoder) duration(attr *hcl.Attribute, dst *time.Duration) bool {
	v, ok := d.value(attr, cty.String)
	if !ok {
		return false
	}
	dur, err := time.ParseDuration(v.AsString())
	if err != nil {
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid duration",
			Detail:   fmt.Sprintf("Attribute %q needs a duration such as \"5s\" or \"1m30s\": %s.", attr.Name, err),
			Subject:  attr.Expr.Range().Ptr(),
		})
		return false
	}
	*dst = dur
	return true
}

func (d *decoder) strList(attr *hcl.Attribute, dst *[]string) bool {
	v, ok := d.value(attr, cty.List(cty.String))
	if !ok {
		return false
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		if ev.IsNull() {
			d.diags = append(d.diags, typeDiag(attr.Name, attr.Expr.Range(), fmt.Errorf("the list must not hold null")))
			return false
		}
		out = append(out, ev.AsString())
	}
	*dst = out
	return true
}

// freeform returns the attribute or the block named name from c, whichever
// is present; both, or two blocks, is an error.
func (d *decoder) freeform(name string, c *hcl.BodyContent) (*hcl.Attribute, *hcl.Block) {
	attr := c.Attributes[name]
	var block *hcl.Block
	for _, b := range c.Blocks {
		if b.Type != name {
			continue
		}
		if block != nil || attr != nil {
			d.diags = append(d.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate " + name,
				Detail:   fmt.Sprintf("%s is defined more than once here; use one %s block or one %s attribute.", name, name, name),
				Subject:  b.DefRange.Ptr(),
			})
			continue
		}
		block = b
	}
	if block != nil {
		attr = nil
	}
	return attr, block
}

// stringMap decodes a free-form map of strings (env, meta) given as a block
// or as an attribute. Numbers and booleans are converted to strings. It
// returns nil when neither is present.
func (d *decoder) stringMap(name string, c *hcl.BodyContent) map[string]string {
	attr, block := d.freeform(name, c)
	switch {
	case attr != nil:
		v, ok := d.value(attr, cty.Map(cty.String))
		if !ok {
			return nil
		}
		out := make(map[string]string, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			if ev.IsNull() {
				d.diags = append(d.diags, typeDiag(attr.Name, attr.Expr.Range(), fmt.Errorf("element %q is null", k.AsString())))
				continue
			}
			out[k.AsString()] = ev.AsString()
		}
		return out
	case block != nil:
		attrs, diags := block.Body.JustAttributes()
		d.diags = append(d.diags, diags...)
		out := make(map[string]string, len(attrs))
		for _, a := range sortedAttrs(attrs) {
			var s string
			if d.str(a, &s) {
				out[a.Name] = s
			}
		}
		return out
	}
	return nil
}

// config decodes the task's driver config, a block or an attribute holding
// any values. Nested blocks inside the config block become lists of maps,
// one map per block, as HCL1 Nomad jobspecs decoded them.
func (d *decoder) config(c *hcl.BodyContent) map[string]interface{} {
	attr, block := d.freeform("config", c)
	switch {
	case attr != nil:
		v, ok := d.value(attr, cty.DynamicPseudoType)
		if !ok {
			return nil
		}
		if !v.Type().IsObjectType() && !v.Type().IsMapType() {
			d.diags = append(d.diags, typeDiag(attr.Name, attr.Expr.Range(), fmt.Errorf("an object is required")))
			return nil
		}
		gv, err := toGo(v)
		if err != nil {
			d.diags = append(d.diags, typeDiag(attr.Name, attr.Expr.Range(), err))
			return nil
		}
		m, _ := gv.(map[string]interface{})
		return m
	case block != nil:
		return d.freeformBody(block.Body)
	}
	return nil
}

func (d *decoder) freeformBody(body hcl.Body) map[string]interface{} {
	out := make(map[string]interface{})
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		attrs, diags := body.JustAttributes()
		d.diags = append(d.diags, diags...)
		for _, a := range sortedAttrs(attrs) {
			d.freeformAttr(a, out)
		}
		return out
	}
	attrs := make(hcl.Attributes, len(sb.Attributes))
	for name, a := range sb.Attributes {
		attrs[name] = a.AsHCLAttribute()
	}
	for _, a := range sortedAttrs(attrs) {
		d.freeformAttr(a, out)
	}
	for _, b := range sb.Blocks {
		if len(b.Labels) > 0 {
			d.diags = append(d.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unexpected block label",
				Detail:   fmt.Sprintf("Blocks inside config take no labels; remove the label of block %q.", b.Type),
				Subject:  b.LabelRanges[0].Ptr(),
			})
			continue
		}
		if _, isAttr := sb.Attributes[b.Type]; isAttr {
			d.diags = append(d.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate config key",
				Detail:   fmt.Sprintf("%q is both an attribute and a block in this config.", b.Type),
				Subject:  b.TypeRange.Ptr(),
			})
			continue
		}
		list, _ := out[b.Type].([]interface{})
		out[b.Type] = append(list, d.freeformBody(b.Body))
	}
	return out
}

func (d *decoder) freeformAttr(a *hcl.Attribute, out map[string]interface{}) {
	v, ok := d.value(a, cty.DynamicPseudoType)
	if !ok {
		return
	}
	gv, err := toGo(v)
	if err != nil {
		d.diags = append(d.diags, typeDiag(a.Name, a.Expr.Range(), err))
		return
	}
	out[a.Name] = gv
}

// sortedAttrs returns attrs in source order, so that diagnostics come out
// in a stable order.
func sortedAttrs(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Range.Start.Byte < out[j].Range.Start.Byte })
	return out
}

// shutdownDelay decodes a group's or task's shutdown_delay: a duration of
// zero or more; the server checks the upper bound
// (structs/shutdown_delay.go).
func (d *decoder) shutdownDelay(attr *hcl.Attribute, dst *time.Duration) {
	d.durationFrom(attr, dst, true, "must be a duration of zero or more, such as \"10s\"", "")
}

// maxRunDuration decodes a group's or task's max_run_duration: a duration
// above zero. Zero is refused here, where it is known to be written (in
// JSON a zero MaxRunDuration means none); the server checks the upper
// bound and the job type (structs/deadline.go).
func (d *decoder) maxRunDuration(attr *hcl.Attribute, dst *time.Duration) {
	d.durationFrom(attr, dst, false, "must be a duration above zero, such as \"30m\" or \"2h\"", " Leave it out for no deadline.")
}

// durationFrom decodes attr into dst as a duration of zero or more
// (zeroOK) or above zero; a smaller one is an "Invalid <attribute>" error
// saying what the attribute must be (must), what it got, then hint, and
// dst is left as is.
func (d *decoder) durationFrom(attr *hcl.Attribute, dst *time.Duration, zeroOK bool, must, hint string) {
	var v time.Duration
	if !d.duration(attr, &v) {
		return
	}
	if v < 0 || v == 0 && !zeroOK {
		detail := fmt.Sprintf("Attribute %q %s; got %s.%s", attr.Name, must, v, hint)
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid " + attr.Name,
			Detail:   detail,
			Subject:  attr.Expr.Range().Ptr(),
		})
		return
	}
	*dst = v
}
