package structs

import (
	"strings"
	"testing"
)

func TestValidateTaskUser(t *testing.T) {
	for u, ok := range map[string]bool{"": true, "nobody": true, "ml-team": true, "_svc": true, "a b": false, "x:y": false, "../root": false, strings.Repeat("u", 33): false} {
		job := &Job{ID: "j", Type: JobTypeBatch, TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Tasks: []*Task{{
			Name: "t", Driver: "native", User: u}}}}}
		job.Canonicalize()
		err := job.Validate()
		if (err == nil) != ok {
			t.Errorf("user %q: err = %v, want ok=%v", u, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "user:") {
			t.Errorf("user %q: error %q does not name the field", u, err)
		}
	}
}
