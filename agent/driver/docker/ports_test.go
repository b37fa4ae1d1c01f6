package docker

import (
	"path/filepath"
	"testing"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// TestContainerConfigGroupPorts: each port the plan gave the allocation
// maps its host port, on its host address, to its "to" port (the host port
// itself when to is unset), next to the ports of the driver config.
func TestContainerConfigGroupPorts(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := t.TempDir()
	cfg := &driver.TaskConfig{
		ID: "a/main", AllocID: "a", Name: "main", TaskDir: filepath.Join(alloc, "main"),
		Ports: []structs.AllocatedPortMapping{
			{Label: "http", Value: 21234, To: 8000, HostIP: "127.0.0.1"},
			{Label: "admin", Value: 21235, HostIP: "127.0.0.1"},
		},
	}
	tc, err := parseConfig(map[string]interface{}{"image": "img", "ports": []interface{}{"8080:80"}}, alloc, Allowances{})
	if err != nil {
		t.Fatal(err)
	}
	cc, hc, err := d.containerConfig(cfg, tc, alloc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"8000/tcp": "21234", "21235/tcp": "21235", "80/tcp": "8080"}
	if len(hc.PortBindings) != len(want) || len(cc.ExposedPorts) != len(want) {
		t.Fatalf("bindings %v exposed %v", hc.PortBindings, cc.ExposedPorts)
	}
	for port, b := range hc.PortBindings {
		if len(b) != 1 || b[0].HostPort != want[port.String()] || b[0].HostIP.String() != "127.0.0.1" {
			t.Fatalf("binding of %s: %+v, want host port %s", port, b, want[port.String()])
		}
	}
}
