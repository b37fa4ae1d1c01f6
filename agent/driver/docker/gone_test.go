package docker

import (
	"context"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
)

// TestDockerImageIDAndTaskGone: InspectTask reports the resolved image ID
// the daemon started (what an endpoint member's artifact digest is), and
// TaskGone refuses while the container exists and proves it gone once
// DestroyTask removed it.
func TestDockerImageIDAndTaskGone(t *testing.T) {
	dockertest.BuildImage(t)
	d := newDriver(t)
	cfg, _, _ := testTask(t, "gone", "sleep", "60")
	h, err := d.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.StopTask(cfg.ID, time.Second, "SIGKILL"); _ = d.DestroyTask(cfg.ID) })
	img, err := d.api.ImageInspect(context.Background(), dockertest.Image)
	if err != nil {
		t.Fatal(err)
	}
	st, err := d.InspectTask(cfg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.ImageID == "" || st.ImageID != img.ID {
		t.Fatalf("InspectTask ImageID = %q, image %s is %q", st.ImageID, dockertest.Image, img.ID)
	}
	if err := d.TaskGone(h); err == nil {
		t.Fatal("TaskGone = nil for a running container")
	}
	if err := d.StopTask(cfg.ID, time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	if err := d.TaskGone(h); err == nil {
		t.Fatal("TaskGone = nil for a stopped container not yet removed")
	}
	if err := d.DestroyTask(cfg.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.TaskGone(h); err != nil {
		t.Fatalf("TaskGone after DestroyTask: %v", err)
	}
	if _, err := d.api.ContainerInspect(context.Background(), h.ContainerID, client.ContainerInspectOptions{}); err == nil {
		t.Fatal("container still exists")
	}
}
