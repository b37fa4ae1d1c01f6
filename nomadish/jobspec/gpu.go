package jobspec

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// GPU scheduling attributes:
//
//	job "train" {
//	  requires     = ["voice"]           # node capabilities every group needs
//	  availability = "opportunistic"     # may run on opportunistic nodes
//	  group "workers" {
//	    count        = 4
//	    gang         = true              # all 4 at once or none
//	    requires     = ["voice"]
//	    availability = "continuous"      # overrides the job's
//	    task "t" {
//	      resources {
//	        device "nvidia/gpu" {
//	          memory = "20 GiB"           # a share of one GPU's memory
//	        }
//	      }
//	    }
//	  }
//	}

// boolean decodes a bool.
func (d *decoder) boolean(attr *hcl.Attribute, dst *bool) bool {
	v, ok := d.value(attr, cty.Bool)
	if ok {
		*dst = v.True()
	}
	return ok
}

// memoryMiB decodes a memory size into MiB: a whole number (MiB) or a
// string with a unit, "512 MiB", "20 GiB", "1 TiB" (binary) or "20 GB",
// "500 MB" (decimal, rounded up to whole MiB). It reports a diagnostic
// naming the attribute for anything else.
func (d *decoder) memoryMiB(attr *hcl.Attribute, dst *int) bool {
	if attr == nil {
		return false
	}
	v, diags := attr.Expr.Value(d.ctx)
	if diags.HasErrors() {
		d.diags = append(d.diags, diags...)
		return false
	}
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return false
	}
	if v.Type() == cty.Number {
		return d.integer(attr, dst)
	}
	var s string
	if !d.str(attr, &s) {
		return false
	}
	mib, err := parseMemorySize(s)
	if err != nil {
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid memory size",
			Detail:   fmt.Sprintf("Attribute %q: %v.", attr.Name, err),
			Subject:  attr.Expr.Range().Ptr(),
		})
		return false
	}
	*dst = mib
	return true
}

// parseMemorySize parses "20 GiB", "20GiB", "512 MiB", "20 GB" or a bare
// number of MiB into MiB.
func parseMemorySize(s string) (int, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("%q is not a size such as \"20 GiB\" or \"512 MiB\"", s)
	}
	var mib float64
	switch strings.ToLower(unit) {
	case "", "mib", "mi":
		mib = f
	case "gib", "gi":
		mib = f * 1024
	case "tib", "ti":
		mib = f * 1024 * 1024
	case "mb":
		mib = f * 1e6 / (1 << 20)
	case "gb":
		mib = f * 1e9 / (1 << 20)
	case "tb":
		mib = f * 1e12 / (1 << 20)
	default:
		return 0, fmt.Errorf("unknown unit %q in %q; use MiB, GiB, TiB, MB, GB or TB", unit, s)
	}
	mib = math.Ceil(mib)
	if mib < 0 || mib > math.MaxInt32 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return int(mib), nil
}

// availability decodes an availability class, "continuous" or
// "opportunistic".
func (d *decoder) availability(attr *hcl.Attribute, dst *string) {
	if !d.str(attr, dst) {
		return
	}
	switch *dst {
	case "continuous", "opportunistic":
	default:
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid availability",
			Detail:   fmt.Sprintf("Attribute \"availability\" must be \"continuous\" or \"opportunistic\"; got %q.", *dst),
			Subject:  attr.Expr.Range().Ptr(),
		})
		*dst = ""
	}
}
