package jobspec

import (
	"regexp"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/hcl/v2"
)

// The endpoint block of a service group (a GPUlayer addition):
//
//	endpoint {
//	  name        = "llm-70b"            # required
//	  port        = 9000                 # required: the router's host port
//	  model       = "llama-3-70b"        # required: the served model name
//	  revision    = "2024-07"
//	  policy      = "least_outstanding"  # or "round_robin" (the default)
//	  models_path = "/v1/models"
//	  member_port = "http"               # a port label of the group's network
//	}
//
// The parser reports, at the offending line, a missing name, port or model,
// a second endpoint block, a name that is not a lowercase DNS label, a port
// outside 1-65535, an unknown policy and a models_path that does not start
// with "/"; the server checks the rest (structs/endpoint_validate.go).
var endpointSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "name", Required: true}, {Name: "port", Required: true}, {Name: "model", Required: true},
		{Name: "revision"}, {Name: "policy"}, {Name: "models_path"}, {Name: "member_port"},
	},
}

// endpointName mirrors structs.ValidEndpointName (jobspec may not import
// structs).
var endpointName = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

// endpointPolicies are the router policies the client implements.
var endpointPolicies = []string{"round_robin", "least_outstanding"}

func (d *decoder) endpoint(block *hcl.Block) *api.Endpoint {
	c := d.content(block.Body, endpointSchema)
	e := &api.Endpoint{}
	if attr := c.Attributes["name"]; d.str(attr, &e.Name) && !endpointName.MatchString(e.Name) {
		d.errAt(attr.Expr.Range(), "Invalid endpoint name", "endpoint name %q must be 1-63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit.", clip(e.Name))
	}
	if attr := c.Attributes["port"]; d.integer(attr, &e.Port) && (e.Port < 1 || e.Port > 65535) {
		d.errAt(attr.Expr.Range(), "Invalid port", "endpoint port must be 1-65535; got %d.", e.Port)
	}
	d.str(c.Attributes["model"], &e.Model)
	d.str(c.Attributes["revision"], &e.Revision)
	if attr := c.Attributes["policy"]; d.str(attr, &e.Policy) && e.Policy != "" && !slices.Contains(endpointPolicies, e.Policy) {
		d.errAt(attr.Expr.Range(), "Invalid endpoint policy", "policy %q is not one of %s.", clip(e.Policy), strings.Join(endpointPolicies, ", "))
	}
	if attr := c.Attributes["models_path"]; d.str(attr, &e.ModelsPath) && !strings.HasPrefix(e.ModelsPath, "/") {
		d.errAt(attr.Expr.Range(), "Invalid models_path", "models_path %q must start with \"/\".", clip(e.ModelsPath))
	}
	d.str(c.Attributes["member_port"], &e.MemberPort)
	return e
}

// clip shortens a user string quoted in a diagnostic.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
