package http

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestStatusForEndpointConflict: a job registration refused because
// another live job holds the endpoint name answers 409 Conflict.
func TestStatusForEndpointConflict(t *testing.T) {
	err := fmt.Errorf("job register %q: %w: group \"g\": endpoint: name: taken", "b", structs.ErrEndpointConflict)
	if got := statusFor(err); got != http.StatusConflict {
		t.Fatalf("statusFor = %d, want %d", got, http.StatusConflict)
	}
}
