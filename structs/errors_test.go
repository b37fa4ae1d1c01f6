package structs

import (
	"fmt"
	"strings"
	"testing"
)

// TestValidationErrorBounded: a ValidationError with very many problems
// (client input can make one per key of a map) renders a bounded message
// naming how many were left out, not every problem (which was megabytes,
// built by quadratic string concatenation: minutes of CPU per request).
func TestValidationErrorBounded(t *testing.T) {
	ve := &ValidationError{}
	for i := range 100_000 {
		ve.Problems = append(ve.Problems, fmt.Sprintf("Meta: key %q is neither in meta_required nor in meta_optional", fmt.Sprint("k", i)))
	}
	msg := ve.Error()
	if len(msg) > 100*MaxShownProblems {
		t.Fatalf("message of %d bytes for %d problems; want at most %d", len(msg), len(ve.Problems), 100*MaxShownProblems)
	}
	if want := fmt.Sprintf("... and %d more problems", len(ve.Problems)-MaxShownProblems); !strings.Contains(msg, want) {
		t.Fatalf("message does not say %q:\n%s", want, msg)
	}
	if !strings.Contains(msg, ve.Problems[0]) || !strings.Contains(msg, ve.Problems[MaxShownProblems-1]) {
		t.Fatal("message lost the first problems")
	}
	two := &ValidationError{Problems: []string{"a", "b"}}
	if got := two.Error(); got != "invalid job:\n  * a\n  * b" {
		t.Fatalf("two problems: %q", got)
	}
}
