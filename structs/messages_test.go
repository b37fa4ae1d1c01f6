package structs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEncodeDecodeJobRegister(t *testing.T) {
	job := &Job{ID: "hello", Type: JobTypeBatch, TaskGroups: []*TaskGroup{{
		Name: "g", Count: 1,
		RestartPolicy: &RestartPolicy{Attempts: 2, Delay: 5 * time.Second, Mode: RestartModeFail},
		Tasks: []*Task{{
			Name: "t", Driver: "native",
			Config:    map[string]interface{}{"command": "/bin/sh", "args": []interface{}{"-c", "echo hi"}},
			Resources: &Resources{CPU: 100, MemoryMB: 64, Devices: []*RequestedDevice{{Name: "nvidia/gpu", Count: 1}}},
		}},
	}}}
	job.Canonicalize()
	buf, err := Encode(JobRegisterRequestType, &JobRegisterRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	if MessageType(buf[0]) != JobRegisterRequestType {
		t.Fatalf("type byte = %d", buf[0])
	}
	var out JobRegisterRequest
	if err := Decode(buf[1:], &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Job, job) {
		t.Fatalf("round trip changed the job:\n got %#v\nwant %#v", out.Job.TaskGroups[0].Tasks[0], job.TaskGroups[0].Tasks[0])
	}
}

func TestDecodeGarbage(t *testing.T) {
	var out JobRegisterRequest
	err := Decode([]byte{0xc1, 0xff, 0x00}, &out)
	if !errors.Is(err, ErrDecode) {
		t.Fatalf("err = %v, want ErrDecode", err)
	}
}

func TestAttributeCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
		ok   bool
	}{
		{"81559 MiB", "40 GiB", 1, true},
		{"40 GiB", "40960 MiB", 0, true},
		{"16384 MiB", "40GiB", -1, true},
		{"9.0", "8.0", 1, true},
		{"H100", "H100", 0, true},
		{"true", "true", 0, true},
		{"1 GHz", "1 GiB", 0, false},
	}
	for _, c := range cases {
		got, ok := ParseAttribute(c.a).Compare(ParseAttribute(c.b))
		if got != c.want || ok != c.ok {
			t.Errorf("%q vs %q = %d,%v want %d,%v", c.a, c.b, got, ok, c.want, c.ok)
		}
	}
}

func TestJobValidateNamesFields(t *testing.T) {
	job := &Job{ID: "j", Type: JobTypeBatch, TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Tasks: []*Task{{
		Name: "t", Driver: "qemu", Resources: &Resources{MemoryMB: -1, Devices: []*RequestedDevice{{Name: "nvidia/gpu", Count: 0}}},
	}}}}}
	job.Canonicalize()
	err := job.Validate()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{`driver: unknown driver "qemu"`, `memory: must be 0 or more MiB`, `device "nvidia/gpu": count: must be at least 1, got 0`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestCopyToleratesNilElements(t *testing.T) {
	n := &Node{Drivers: map[string]*DriverInfo{"native": nil}, NodeResources: &NodeResources{Devices: []*DeviceGroup{nil, {Instances: []*DeviceInstance{nil}}}}}
	if c := n.Copy(); c.Drivers["native"] != nil || c.NodeResources.Devices[0] != nil {
		t.Fatalf("copy = %+v", c)
	}
	if ids := n.NodeResources.Devices[1].HealthyInstances(); len(ids) != 0 {
		t.Fatalf("healthy = %v", ids)
	}
	a := &Allocation{AllocatedResources: &AllocatedResources{Tasks: map[string]*AllocatedTaskResources{"t": nil}},
		TaskStates: map[string]*TaskState{"t": {Events: []*TaskEvent{nil}}}}
	if c := a.Copy(); c.AllocatedResources.Tasks["t"] != nil || len(a.DeviceIDs()) != 0 {
		t.Fatalf("copy = %+v", c)
	}
}

func TestValidateKillSignal(t *testing.T) {
	for sig, ok := range map[string]bool{"": true, "SIGTERM": true, "term": true, "SIGUSR1": true, "SIGBOGUS": false, "9": false} {
		job := &Job{ID: "j", Type: JobTypeBatch, TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Tasks: []*Task{{
			Name: "t", Driver: "native", KillSignal: sig}}}}}
		job.Canonicalize()
		err := job.Validate()
		if (err == nil) != ok {
			t.Errorf("kill_signal %q: err = %v, want ok=%v", sig, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "kill_signal") {
			t.Errorf("kill_signal %q: error %q does not name the field", sig, err)
		}
	}
}

func TestNormalizedStopKeepsWhatTheStoreTakes(t *testing.T) {
	a := &Allocation{ID: "a", NodeID: "n", JobID: "j", TaskGroup: "g", Job: &Job{ID: "j"},
		DesiredStatus: AllocDesiredStatusEvict, DesiredDescription: "preempted", PreemptedByJob: "high", ModifyTime: 7,
		TaskStates: map[string]*TaskState{"t": {}}}
	got := NormalizedStop(a)
	want := &Allocation{ID: "a", NodeID: "n", JobID: "j", TaskGroup: "g",
		DesiredStatus: AllocDesiredStatusEvict, DesiredDescription: "preempted", PreemptedByJob: "high", ModifyTime: 7}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("NormalizedStop = %+v, want %+v", got, want)
	}
}
