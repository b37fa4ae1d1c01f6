package docker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

func TestParseConfigErrors(t *testing.T) {
	alloc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(alloc, "main", "local"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(alloc, "escape")); err != nil {
		t.Fatal(err)
	}
	mounts := func(src string) map[string]interface{} {
		return map[string]interface{}{"image": "x", "mounts": []interface{}{map[string]interface{}{"source": src, "target": "/data"}}}
	}
	cases := []struct {
		name string
		cfg  map[string]interface{}
		want string
	}{
		{"unknown key", map[string]interface{}{"image": "x", "imagee": "y"}, `unknown key "imagee"`},
		{"no image", map[string]interface{}{"command": "/bin/true"}, `key "image" is required`},
		{"mount outside", mounts("/etc"), `mount "/etc" (element 0) is refused`},
		{"mount dot dot", mounts("../../etc"), `mount "../../etc" (element 0) is refused`},
		{"mount through symlink", mounts("escape/passwd"), `mount "escape/passwd" (element 0) is refused`},
		{"mount missing", mounts("newdir"), "newdir does not exist"},
		{"mount no target", map[string]interface{}{"image": "x", "mounts": []interface{}{map[string]interface{}{"source": "main"}}}, "needs a source and an absolute target"},
		{"mount unknown key", map[string]interface{}{"image": "x", "mounts": []interface{}{map[string]interface{}{"source": "main", "target": "/d", "mode": "rw"}}}, `unknown key "mode"`},
		{"bad port", map[string]interface{}{"image": "x", "ports": []interface{}{"80:http"}}, `key "ports": element 0 "80:http"`},
		{"port range", map[string]interface{}{"image": "x", "ports": []interface{}{"70000"}}, "not a number from 1 to 65535"},
		{"relative work_dir", map[string]interface{}{"image": "x", "work_dir": "app"}, `key "work_dir" must be an absolute path`},
		{"args not list", map[string]interface{}{"image": "x", "args": "a b"}, `key "args" must be a list of strings`},
		{"reserved label", map[string]interface{}{"image": "x", "labels": map[string]interface{}{"gpulayer.alloc_id": "x"}}, "reserved prefix"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.cfg, alloc, Allowances{})
			if !errors.Is(err, driver.ErrInvalidConfig) || !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("error %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	// Paths inside the alloc dir are accepted, relative or absolute.
	for _, src := range []string{"main/local", filepath.Join(alloc, "main"), "."} {
		tc, err := parseConfig(mounts(src), alloc, Allowances{})
		if err != nil {
			t.Fatalf("mount %q: %v", src, err)
		}
		if !strings.HasPrefix(tc.Mounts[0].Source, alloc) && !strings.HasPrefix(tc.Mounts[0].Source, "/") {
			t.Fatalf("mount %q resolved to %q", src, tc.Mounts[0].Source)
		}
	}
}

func TestContainerConfigGPUsAndLimits(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := t.TempDir()
	cfg := &driver.TaskConfig{
		ID: "a/main", AllocID: "a", Name: "main", JobName: "j", TaskGroup: "g", TaskDir: filepath.Join(alloc, "main"),
		Env: map[string]string{"GPULAYER_TASK_DIR": "/host/path", "NVIDIA_VISIBLE_DEVICES": "GPU-aaa,GPU-bbb"},
		Resources: &structs.AllocatedTaskResources{CPU: 500, MemoryMB: 64, Devices: []*structs.AllocatedDeviceResource{
			{Vendor: "nvidia", Type: structs.DeviceTypeGPU, Name: "A100", DeviceIDs: []string{"GPU-aaa", "GPU-bbb"}},
		}},
	}
	tc, err := parseConfig(map[string]interface{}{"image": "img", "ports": []interface{}{"8080:80"}}, alloc, Allowances{})
	if err != nil {
		t.Fatal(err)
	}
	cc, hc, err := d.containerConfig(cfg, tc, alloc)
	if err != nil {
		t.Fatal(err)
	}
	if len(hc.DeviceRequests) != 1 || hc.DeviceRequests[0].Driver != "nvidia" || strings.Join(hc.DeviceRequests[0].DeviceIDs, ",") != "GPU-aaa,GPU-bbb" {
		t.Fatalf("device requests %+v, want the nvidia driver with both UUIDs", hc.DeviceRequests)
	}
	if hc.Memory != 64<<20 || hc.CPUShares != 500 {
		t.Fatalf("limits memory %d cpu shares %d", hc.Memory, hc.CPUShares)
	}
	if cc.Labels[LabelAllocID] != "a" || cc.Labels[LabelTask] != "main" || cc.Labels[LabelJob] != "j" {
		t.Fatalf("labels %v", cc.Labels)
	}
	if !contains(cc.Env, "GPULAYER_TASK_DIR=/alloc/main") {
		t.Fatalf("task dir env not mapped into the container: %v", cc.Env)
	}
	if len(hc.PortBindings) != 1 {
		t.Fatalf("port bindings %v", hc.PortBindings)
	}
	// No GPUs: no device request at all.
	cfg.Resources.Devices = nil
	_, hc, _ = d.containerConfig(cfg, tc, alloc)
	if hc.DeviceRequests != nil {
		t.Fatalf("device requests without GPUs: %+v", hc.DeviceRequests)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func FuzzParseConfig(f *testing.F) {
	f.Add("img", "8080:80/tcp", "data", "/data")
	f.Add("", "1:2:3:4", "../x", "rel")
	alloc := f.TempDir()
	f.Fuzz(func(t *testing.T, image, port, src, dst string) {
		m := map[string]interface{}{"image": image, "ports": []interface{}{port}, "mounts": []interface{}{map[string]interface{}{"source": src, "target": dst}}}
		tc, err := parseConfig(m, alloc, Allowances{})
		if err == nil {
			if verr := ValidateConfig(m, nil); verr != nil {
				t.Fatalf("the client accepts %v but the server refuses it: %v", m, verr)
			}
		}
		if err != nil {
			if !errors.Is(err, driver.ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		for _, mt := range tc.Mounts {
			rel, rerr := filepath.Rel(alloc, mt.Source)
			if root, _ := filepath.EvalSymlinks(alloc); rerr != nil || strings.HasPrefix(rel, "..") {
				if r2, err := filepath.Rel(root, mt.Source); err != nil || strings.HasPrefix(r2, "..") {
					t.Fatalf("mount source %q escapes %q", mt.Source, alloc)
				}
			}
		}
	})
}
