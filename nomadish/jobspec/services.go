package jobspec

import (
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/hcl/v2"
)

// Network and service blocks, in Nomad's shape:
//
//	network { mode = "host"  port "http" { static = 8080  to = 8000  host_network = "default" } }
//	service { name = "web"  port = "http"  tags = ["v1"]  provider = "gpulayer"
//	          check { type = "http"  path = "/health"  interval = "10s"  timeout = "2s" } }
//
// The parser reports, at the offending line, a check type other than http,
// tcp or script, a negative or missing interval or timeout, a port label
// used twice, and a provider other than gpulayer or nomad; the server
// checks the rest (structs/service.go).
var (
	networkSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "mode"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "port", LabelNames: []string{"label"}}},
	}
	portSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "static"}, {Name: "to"}, {Name: "host_network"}},
	}
	serviceSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "name"}, {Name: "port"}, {Name: "tags"}, {Name: "provider"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "check"}},
	}
	checkSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "name"}, {Name: "type"}, {Name: "path"}, {Name: "port"}, {Name: "command"}, {Name: "args"},
			{Name: "task"}, {Name: "interval"}, {Name: "timeout"},
		},
	}
)

// checkTypes are the check types the client runs.
var checkTypes = []string{"http", "tcp", "script"}

func (d *decoder) errAt(rng hcl.Range, summary, format string, a ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, a...), Subject: rng.Ptr(),
	})
}

// network decodes a group's network block; labels tracks the port labels
// seen in the group, so one used twice is reported where it repeats.
func (d *decoder) network(block *hcl.Block, labels map[string]hcl.Range) *api.NetworkResource {
	c := d.content(block.Body, networkSchema)
	n := &api.NetworkResource{}
	if attr := c.Attributes["mode"]; d.str(attr, &n.Mode) && n.Mode != "host" {
		d.errAt(attr.Expr.Range(), "Unsupported network mode", "network mode %q is not supported; only \"host\" is.", n.Mode)
	}
	for _, b := range c.Blocks {
		label := b.Labels[0]
		if first, dup := labels[label]; dup {
			d.errAt(b.DefRange, "Duplicate port label", "port %q is already defined at line %d; each port label of a group must be unique.", label, first.Start.Line)
			continue
		}
		labels[label] = b.DefRange
		pc := d.content(b.Body, portSchema)
		p := api.Port{Label: label}
		static := false
		if attr := pc.Attributes["static"]; d.integer(attr, &p.Value) {
			static = true
			if p.Value < 1 || p.Value > 65535 {
				d.errAt(attr.Expr.Range(), "Invalid port", "static port of %q must be 1-65535; got %d.", label, p.Value)
			}
		}
		if attr := pc.Attributes["to"]; d.integer(attr, &p.To) && (p.To < -1 || p.To > 65535) {
			d.errAt(attr.Expr.Range(), "Invalid port", "to of port %q must be -1-65535; got %d.", label, p.To)
		}
		d.str(pc.Attributes["host_network"], &p.HostNetwork)
		if static {
			n.ReservedPorts = append(n.ReservedPorts, p)
		} else {
			n.DynamicPorts = append(n.DynamicPorts, p)
		}
	}
	return n
}

func (d *decoder) service(block *hcl.Block) *api.Service {
	c := d.content(block.Body, serviceSchema)
	s := &api.Service{}
	if !d.str(c.Attributes["name"], &s.Name) {
		d.errAt(block.DefRange, "Missing service name", "A service block needs a name.")
	}
	d.str(c.Attributes["port"], &s.PortLabel)
	d.strList(c.Attributes["tags"], &s.Tags)
	if attr := c.Attributes["provider"]; d.str(attr, &s.Provider) && s.Provider != "gpulayer" && s.Provider != "nomad" {
		d.errAt(attr.Expr.Range(), "Unsupported service provider",
			"service %q: provider %q is not supported; use \"gpulayer\" (or \"nomad\", its synonym).", s.Name, s.Provider)
	}
	for _, b := range c.Blocks {
		s.Checks = append(s.Checks, d.check(b, s.Name))
	}
	return s
}

func (d *decoder) check(block *hcl.Block, service string) *api.ServiceCheck {
	c := d.content(block.Body, checkSchema)
	ch := &api.ServiceCheck{}
	d.str(c.Attributes["name"], &ch.Name)
	if attr := c.Attributes["type"]; attr == nil {
		d.errAt(block.DefRange, "Missing check type", "The check of service %q needs a type: one of http, tcp or script.", service)
	} else if d.str(attr, &ch.Type) {
		known := false
		for _, t := range checkTypes {
			known = known || t == ch.Type
		}
		if !known {
			d.errAt(attr.Expr.Range(), "Unknown check type", "The check of service %q has type %q; want one of http, tcp or script.", service, ch.Type)
		}
	}
	d.str(c.Attributes["path"], &ch.Path)
	d.str(c.Attributes["port"], &ch.PortLabel)
	d.str(c.Attributes["command"], &ch.Command)
	d.strList(c.Attributes["args"], &ch.Args)
	d.str(c.Attributes["task"], &ch.TaskName)
	d.checkDuration(block, c, "interval", service, &ch.Interval)
	d.checkDuration(block, c, "timeout", service, &ch.Timeout)
	return ch
}

// checkDuration decodes a check's interval or timeout (attribute name):
// required, and not negative.
func (d *decoder) checkDuration(block *hcl.Block, c *hcl.BodyContent, name, service string, dst *time.Duration) {
	attr := c.Attributes[name]
	if attr == nil {
		d.errAt(block.DefRange, "Missing check "+name, "The check of service %q needs a%s %s, such as \"10s\".", service, article(name), name)
		return
	}
	if d.duration(attr, dst) && *dst < 0 {
		d.errAt(attr.Expr.Range(), "Invalid check "+name,
			"The %s of the check of service %q must not be negative; got %s.", name, service, *dst)
	}
}

func article(word string) string {
	if word != "" && (word[0] == 'i' || word[0] == 'a' || word[0] == 'e' || word[0] == 'o' || word[0] == 'u') {
		return "n"
	}
	return ""
}
