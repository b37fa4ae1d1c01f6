package docker_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/server/provision/docker"
)

// TestMain removes the host images this test binary built (each build of
// gpulayer gets a new tag), leaving those that were there before and any
// another run's container still uses (no force).
func TestMain(m *testing.M) {
	before := hostImages()
	code := m.Run()
	if before != nil {
		for id := range hostImages() {
			if !before[id] {
				_ = exec.Command("docker", "rmi", id).Run()
			}
		}
	}
	os.Exit(code)
}

// hostImages returns the IDs of the images labelled as the provider's;
// nil when Docker does not answer.
func hostImages() map[string]bool {
	out, err := exec.Command("docker", "images", "-q", "--no-trunc", "--filter", "label="+docker.LabelManaged+"=true").Output()
	if err != nil {
		return nil
	}
	ids := map[string]bool{}
	for _, id := range strings.Fields(string(out)) {
		ids[id] = true
	}
	return ids
}
