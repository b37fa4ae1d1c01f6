// Package statetest builds valid fixtures (nodes, jobs, allocations,
// evaluations) for tests of any package. Each call returns a fresh object
// with new random IDs that the caller may change freely.
package statetest

import (
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// Node returns a ready, eligible Linux node with 8 cores (16000 MHz),
// 64 GiB (65536 MiB) of memory, the native driver, and one NVIDIA H100
// device group of gpus healthy instances (none when gpus is 0). Each
// instance has a unique "GPU-<uuid>" ID and 81559 MiB of memory.
func Node(gpus int) *structs.Node {
	id := structs.GenerateUUID()
	n := &structs.Node{
		ID:         id,
		SecretID:   structs.GenerateUUID(),
		Name:       "node-" + structs.ShortID(id),
		Datacenter: "dc1",
		HTTPAddr:   "127.0.0.1:4656",
		Attributes: map[string]string{
			"kernel.name":     "linux",
			"cpu.arch":        "amd64",
			"cpu.numcores":    "8",
			"driver.native":   "1",
			"unique.hostname": "node-" + structs.ShortID(id),
		},
		Meta: map[string]string{},
		Drivers: map[string]*structs.DriverInfo{
			"native": {Detected: true, Healthy: true},
		},
		NodeResources: &structs.NodeResources{CPU: 16000, Cores: 8, MemoryMB: 65536},
		ReservedResources: &structs.NodeReservedResources{
			CPU: 100, MemoryMB: 256,
		},
		Status:                structs.NodeStatusReady,
		SchedulingEligibility: structs.NodeSchedulingEligible,
	}
	if gpus > 0 {
		g := &structs.DeviceGroup{
			Vendor: structs.DeviceVendorNvidia,
			Type:   structs.DeviceTypeGPU,
			Name:   "NVIDIA H100 80GB HBM3",
			Attributes: map[string]*structs.Attribute{
				"memory":             structs.NewIntAttribute(81559, "MiB"),
				"compute_capability": structs.NewStringAttribute("9.0"),
			},
		}
		for i := 0; i < gpus; i++ {
			g.Instances = append(g.Instances, &structs.DeviceInstance{
				ID:       "GPU-" + structs.GenerateUUID(),
				Healthy:  true,
				Locality: fmt.Sprintf("00000000:%02X:00.0", i+1),
			})
		}
		n.NodeResources.Devices = []*structs.DeviceGroup{g}
	}
	return n
}

// Job returns a canonicalized, valid service job "web-<short uuid>" with one
// group "web" of count 1 and one native task "server" asking for 500 MHz
// and 256 MiB.
func Job() *structs.Job {
	job := &structs.Job{
		ID:   "web-" + structs.ShortID(structs.GenerateUUID()),
		Type: structs.JobTypeService,
		TaskGroups: []*structs.TaskGroup{{
			Name:  "web",
			Count: 1,
			Tasks: []*structs.Task{{
				Name:   "server",
				Driver: "native",
				Config: map[string]interface{}{
					"command": "/bin/sleep",
					"args":    []interface{}{"3600"},
				},
				Resources: &structs.Resources{CPU: 500, MemoryMB: 256},
			}},
		}},
	}
	job.Canonicalize()
	return job
}

// BatchJob returns Job as a batch job "train-<short uuid>" whose task asks
// for gpus NVIDIA GPUs (none when 0).
func BatchJob(gpus int) *structs.Job {
	job := Job()
	job.ID = "train-" + structs.ShortID(structs.GenerateUUID())
	job.Name = job.ID
	job.Type = structs.JobTypeBatch
	job.TaskGroups[0].RestartPolicy = structs.DefaultRestartPolicy(structs.JobTypeBatch)
	if gpus > 0 {
		job.TaskGroups[0].Tasks[0].Resources.Devices = []*structs.RequestedDevice{{Name: "nvidia/gpu", Count: gpus}}
	}
	return job
}

// Alloc returns an allocation of job's first group and first task on node,
// desired "run" and client "pending", holding the task's CPU and memory and
// (when the task asks for devices) the first instances of node's first
// device group. job and node must have been built by this package or be
// equally complete.
func Alloc(job *structs.Job, node *structs.Node) *structs.Allocation {
	tg := job.TaskGroups[0]
	task := tg.Tasks[0]
	tr := &structs.AllocatedTaskResources{
		CPU:      int64(task.Resources.CPU),
		MemoryMB: int64(task.Resources.MemoryMB),
	}
	want := 0
	for _, d := range task.Resources.Devices {
		want += d.Count
	}
	if want > 0 && node.NodeResources != nil && len(node.NodeResources.Devices) > 0 {
		g := node.NodeResources.Devices[0]
		ids := g.HealthyInstances()
		if want < len(ids) {
			ids = ids[:want]
		}
		tr.Devices = []*structs.AllocatedDeviceResource{{Vendor: g.Vendor, Type: g.Type, Name: g.Name, DeviceIDs: ids}}
	}
	return &structs.Allocation{
		ID:                 structs.GenerateUUID(),
		Namespace:          job.Namespace,
		EvalID:             structs.GenerateUUID(),
		Name:               structs.AllocName(job.ID, tg.Name, 0),
		NodeID:             node.ID,
		NodeName:           node.Name,
		JobID:              job.ID,
		Job:                job,
		TaskGroup:          tg.Name,
		AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{task.Name: tr}},
		DesiredStatus:      structs.AllocDesiredStatusRun,
		ClientStatus:       structs.AllocClientStatusPending,
	}
}

// Eval returns a pending job-register evaluation for job.
func Eval(job *structs.Job) *structs.Evaluation {
	return &structs.Evaluation{
		ID:             structs.GenerateUUID(),
		Namespace:      job.Namespace,
		Priority:       job.Priority,
		Type:           job.Type,
		TriggeredBy:    structs.EvalTriggerJobRegister,
		JobID:          job.ID,
		JobModifyIndex: job.JobModifyIndex,
		Status:         structs.EvalStatusPending,
	}
}
