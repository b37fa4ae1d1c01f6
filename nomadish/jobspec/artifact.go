package jobspec

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// artifactSchema is Nomad's task `artifact` block: source, destination,
// mode and options { checksum }, plus a top-level checksum.
var artifactSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true}, {Name: "destination"}, {Name: "mode"}, {Name: "checksum"},
		{Name: "options"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "options"}},
}

// artifact decodes one artifact block. Its values are checked by the
// job's Validate (scheme, checksum, destination), which names the field.
func (d *decoder) artifact(block *hcl.Block) *api.TaskArtifact {
	c := d.content(block.Body, artifactSchema)
	a := &api.TaskArtifact{}
	d.str(c.Attributes["source"], &a.GetterSource)
	d.str(c.Attributes["destination"], &a.RelativeDest)
	d.str(c.Attributes["mode"], &a.GetterMode)
	d.str(c.Attributes["checksum"], &a.Checksum)
	a.GetterOptions = d.stringMap("options", c)
	return a
}
