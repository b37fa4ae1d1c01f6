package jobspec

import (
	"fmt"
	"io"
	"os"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// MaxNodePoolSpecBytes bounds a node pool specification file.
const MaxNodePoolSpecBytes = 64 << 10

var (
	nodePoolRootSchema = &hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: "node_pool", LabelNames: []string{"name"}}},
	}
	nodePoolSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "description"}, {Name: "meta"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "meta"}, {Type: "scaling"}, {Type: "scheduler_config"}},
	}
	poolScalingSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "provider"}, {Name: "min"}, {Name: "max"}, {Name: "cooldown"}, {Name: "idle_after"}, {Name: "config"},
		},
		Blocks: []hcl.BlockHeaderSchema{{Type: "config"}, {Type: "shape"}, {Type: "idle"}},
	}
	poolShapeSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "node_class"}, {Name: "gpu_model"}, {Name: "gpu_count"}, {Name: "gpu_memory_mb"},
			{Name: "memory_model"}, {Name: "availability"},
		},
	}
	poolIdleSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "no_allocations"}, {Name: "gpu_util_below"}, {Name: "gpu_util_for"}},
	}
)

// ParseNodePoolFile reads the node pool specification at path ("-" reads
// r, standard input for the CLI) and parses it with ParseNodePool. A file
// over MaxNodePoolSpecBytes is refused before parsing.
func ParseNodePoolFile(path string, r io.Reader) (*api.NodePool, error) {
	name := path
	if path == "-" {
		name = "<stdin>"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	src, err := io.ReadAll(io.LimitReader(r, MaxNodePoolSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(src) > MaxNodePoolSpecBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, MaxNodePoolSpecBytes)
	}
	return ParseNodePool(name, src)
}

// ParseNodePool parses a node pool specification (Nomad's node_pool file,
// plus GPUlayer's scaling block) read from filename (used in messages
// only):
//
//	node_pool "gpu" {
//	  description = "A100 hosts on demand"
//	  meta { team = "ml" }
//	  scaling {
//	    provider   = "docker"        # or "exec"
//	    min        = 0
//	    max        = 4
//	    cooldown   = "30s"
//	    idle_after = "2m"
//	    config { image = "gpulayer:dev" }
//	    shape {
//	      node_class    = "a100"
//	      gpu_model     = "NVIDIA A100-SXM4-80GB"
//	      gpu_count     = 1
//	      gpu_memory_mb = 81920          # or "80 GiB"
//	      memory_model  = "discrete"
//	      availability  = "continuous"
//	    }
//	    idle {
//	      no_allocations = true
//	      gpu_util_below = 5             # percent
//	      gpu_util_for   = "10m"
//	    }
//	  }
//	}
//
// The file holds exactly one node_pool block. Expressions are literals:
// there are no variables or functions. The parser checks syntax and types;
// the server checks the values (structs.NodePool.Validate). Every failure
// is an *Error whose lines read "file:line:col: message"; it does not panic
// on any input.
func ParseNodePool(filename string, src []byte) (pool *api.NodePool, err error) {
	defer func() {
		if r := recover(); r != nil {
			pool = nil
			err = &Error{Diagnostics: hcl.Diagnostics{{
				Severity: hcl.DiagError, Summary: internalErrorSummary, Detail: fmt.Sprintf("%v", r),
				Subject: &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
			}}}
		}
	}()
	if len(src) > MaxNodePoolSpecBytes {
		return nil, newError(hcl.Diagnostics{{
			Severity: hcl.DiagError, Summary: "Node pool specification too large",
			Detail:  fmt.Sprintf("At most %d bytes, got %d.", MaxNodePoolSpecBytes, len(src)),
			Subject: &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		}})
	}
	pool, diags := parseNodePool(filename, src)
	if diags.HasErrors() {
		return nil, newError(diags)
	}
	return pool, nil
}

func parseNodePool(filename string, src []byte) (*api.NodePool, hcl.Diagnostics) {
	if diags := CheckNesting(filename, src); diags.HasErrors() {
		return nil, diags
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	content, more := file.Body.Content(nodePoolRootSchema)
	diags = append(diags, more...)
	if diags.HasErrors() {
		return nil, diags
	}
	switch n := len(content.Blocks); {
	case n == 0:
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Missing node_pool block",
			Detail:  `A node pool specification needs exactly one node_pool block, e.g. node_pool "gpu" { ... }.`,
			Subject: &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		})
	case n > 1:
		for _, extra := range content.Blocks[1:] {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Duplicate node_pool block",
				Detail:  fmt.Sprintf("A file holds exactly one node pool; the first is at %s.", posString(content.Blocks[0].DefRange)),
				Subject: extra.DefRange.Ptr(),
			})
		}
		return nil, diags
	}
	d := &decoder{budget: &budget{left: MaxEvalWork}}
	pool := d.nodePool(content.Blocks[0])
	diags = append(diags, d.diags...)
	return pool, diags
}

func (d *decoder) nodePool(block *hcl.Block) *api.NodePool {
	c := d.content(block.Body, nodePoolSchema)
	p := &api.NodePool{Name: block.Labels[0]}
	d.str(c.Attributes["description"], &p.Description)
	p.Meta = d.stringMap("meta", c)
	for _, b := range c.Blocks {
		switch b.Type {
		case "scheduler_config":
			d.errAt(b.DefRange, "Unsupported block type",
				"scheduler_config is Nomad Enterprise's per-pool scheduler configuration, which GPUlayer does not have.")
		case "scaling":
			if p.Scaling != nil {
				d.duplicateBlock(b)
				continue
			}
			p.Scaling = d.poolScaling(b)
		}
	}
	return p
}

func (d *decoder) poolScaling(block *hcl.Block) *api.NodePoolScalingPolicy {
	c := d.content(block.Body, poolScalingSchema)
	s := &api.NodePoolScalingPolicy{}
	d.str(c.Attributes["provider"], &s.Provider)
	d.integer(c.Attributes["min"], &s.Min)
	d.integer(c.Attributes["max"], &s.Max)
	d.duration(c.Attributes["cooldown"], &s.Cooldown)
	d.duration(c.Attributes["idle_after"], &s.IdleAfter)
	s.ProviderConfig = d.stringMap("config", c)
	var shape, idle *hcl.Block
	for _, b := range c.Blocks {
		switch b.Type {
		case "shape":
			if shape != nil {
				d.duplicateBlock(b)
				continue
			}
			shape = b
			sc := d.content(b.Body, poolShapeSchema)
			d.str(sc.Attributes["node_class"], &s.Shape.NodeClass)
			d.str(sc.Attributes["gpu_model"], &s.Shape.GPUModel)
			d.integer(sc.Attributes["gpu_count"], &s.Shape.GPUCount)
			d.memoryMiB(sc.Attributes["gpu_memory_mb"], &s.Shape.GPUMemoryMB)
			d.str(sc.Attributes["memory_model"], &s.Shape.MemoryModel)
			d.str(sc.Attributes["availability"], &s.Shape.Availability)
		case "idle":
			if idle != nil {
				d.duplicateBlock(b)
				continue
			}
			idle = b
			ic := d.content(b.Body, poolIdleSchema)
			d.boolean(ic.Attributes["no_allocations"], &s.Idle.NoAllocations)
			d.integer(ic.Attributes["gpu_util_below"], &s.Idle.GPUUtilBelowPercent)
			d.duration(ic.Attributes["gpu_util_for"], &s.Idle.GPUUtilFor)
		}
	}
	return s
}
