package clienttest

import (
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// NativeAlloc returns a runnable allocation on nodeID for a one-task job of
// jobType whose task runs command with args through the native driver,
// holding the given GPU instance IDs (none when empty). The restart policy
// is 0 attempts, mode fail, unless changed by the caller.
func NativeAlloc(nodeID, jobType, command string, args []string, gpuIDs []string) *structs.Allocation {
	argv := make([]interface{}, len(args))
	for i, a := range args {
		argv[i] = a
	}
	task := &structs.Task{
		Name:        "main",
		Driver:      "native",
		Config:      map[string]interface{}{"command": command, "args": argv},
		Resources:   &structs.Resources{CPU: 100, MemoryMB: 64},
		KillTimeout: 2 * time.Second,
	}
	tr := &structs.AllocatedTaskResources{CPU: 100, MemoryMB: 64}
	if len(gpuIDs) > 0 {
		task.Resources.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: len(gpuIDs)}}
		tr.Devices = []*structs.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "Simulated NVIDIA GPU", DeviceIDs: append([]string(nil), gpuIDs...)}}
	}
	job := &structs.Job{
		ID:          "job-" + structs.ShortID(structs.GenerateUUID()),
		Type:        jobType,
		Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{
			Name:          "group",
			Count:         1,
			RestartPolicy: &structs.RestartPolicy{Attempts: 0, Interval: time.Minute, Delay: 10 * time.Millisecond, Mode: structs.RestartModeFail},
			Tasks:         []*structs.Task{task},
		}},
	}
	job.Canonicalize()
	return &structs.Allocation{
		ID:                 structs.GenerateUUID(),
		Namespace:          "default",
		Name:               structs.AllocName(job.ID, "group", 0),
		NodeID:             nodeID,
		JobID:              job.ID,
		Job:                job,
		TaskGroup:          "group",
		AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{"main": tr}},
		DesiredStatus:      structs.AllocDesiredStatusRun,
		ClientStatus:       structs.AllocClientStatusPending,
	}
}
