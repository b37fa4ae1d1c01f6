package structs

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func boundsJob() *Job {
	j := &Job{ID: "j", Name: "j", Type: JobTypeBatch, Priority: 50, Datacenters: []string{"dc1"},
		TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Tasks: []*Task{{Name: "t", Driver: "native",
			Config:    map[string]interface{}{"command": "/bin/true"},
			Resources: &Resources{CPU: 100, MemoryMB: 100}}}}}}
	j.Canonicalize()
	return j
}

// TestJobValidateBounds: every number past its bound, every bad name and
// every oversized map is refused naming the field; a big GPU node's job
// (2 TiB, 8 GPUs of 141 GiB as shares, 1.4 M MHz) passes.
func TestJobValidateBounds(t *testing.T) {
	deep := map[string]interface{}{"command": "/bin/true"}
	cur := deep
	for range MaxDriverConfigDepth + 1 {
		next := map[string]interface{}{}
		cur["x"] = next
		cur = next
	}
	wide := map[string]interface{}{"command": "/bin/true"}
	list := make([]interface{}, MaxDriverConfigElements)
	for i := range list {
		list[i] = 1.0
	}
	wide["args"] = list
	bigMeta := map[string]string{}
	for i := range MaxMapEntries + 1 {
		bigMeta[strings.Repeat("k", 1+i%100)+string(rune('a'+i%26))+string(rune('a'+i/26%26))] = "v"
	}
	cases := []struct {
		name   string
		change func(j *Job)
		want   string
	}{
		{"memory", func(j *Job) { j.TaskGroups[0].Tasks[0].Resources.MemoryMB = math.MaxInt64 }, `task "t": resources: memory: at most`},
		{"cpu", func(j *Job) { j.TaskGroups[0].Tasks[0].Resources.CPU = math.MaxInt64 }, `task "t": resources: cpu: at most`},
		{"kill_timeout", func(j *Job) { j.TaskGroups[0].Tasks[0].KillTimeout = math.MaxInt64 }, `kill_timeout: at most 24h0m0s`},
		{"device count", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Resources.Devices = []*RequestedDevice{{Name: "nvidia/gpu", Count: math.MaxInt64}}
		}, `device "nvidia/gpu": count: at most 1024`},
		{"device memory", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Resources.Devices = []*RequestedDevice{{Name: "nvidia/gpu", Count: 1, MemoryMB: math.MaxInt64}}
		}, `device "nvidia/gpu": memory: at most`},
		{"restart attempts", func(j *Job) { j.TaskGroups[0].RestartPolicy.Attempts = math.MaxInt64 }, "restart: attempts: at most"},
		{"restart delay", func(j *Job) { j.TaskGroups[0].RestartPolicy.Delay = math.MaxInt64 }, "restart: delay: at most"},
		{"restart interval", func(j *Job) { j.TaskGroups[0].RestartPolicy.Interval = math.MaxInt64 }, "restart: interval: at most"},
		{"reschedule attempts", func(j *Job) {
			j.TaskGroups[0].ReschedulePolicy = &ReschedulePolicy{Attempts: math.MaxInt64}
		}, "reschedule: attempts: at most"},
		{"reschedule delay", func(j *Job) {
			j.TaskGroups[0].ReschedulePolicy = &ReschedulePolicy{Delay: math.MaxInt64, MaxDelay: math.MaxInt64}
		}, "reschedule: max_delay: at most"},
		{"namespace", func(j *Job) { j.Namespace = "../etc" }, "namespace: must be 1-128"},
		{"namespace length", func(j *Job) { j.Namespace = strings.Repeat("a", 129) }, "namespace: must be 1-128"},
		{"job name control", func(j *Job) { j.Name = "a\nb" }, "name: must be"},
		{"job name length", func(j *Job) { j.Name = strings.Repeat("a", 129) }, "name: must be"},
		{"job ID slash", func(j *Job) { j.ID = "a/b" }, "ID: must be"},
		{"job ID NUL", func(j *Job) { j.ID = "a\x00" }, "ID: must be"},
		{"task name dotdot", func(j *Job) { j.TaskGroups[0].Tasks[0].Name = ".." }, `name: invalid name ".."`},
		{"group name slash", func(j *Job) { j.TaskGroups[0].Name = "a/b" }, `name: invalid name "a/b"`},
		{"datacenter", func(j *Job) { j.Datacenters = []string{"dc 1"} }, `datacenters: "dc 1"`},
		{"meta key", func(j *Job) { j.Meta = map[string]string{"": "x"} }, `meta: key ""`},
		{"meta size", func(j *Job) { j.Meta = bigMeta }, "meta: at most 1024 entries"},
		{"meta value", func(j *Job) { j.TaskGroups[0].Meta = map[string]string{"k": strings.Repeat("v", MaxValueLength+1)} }, `meta: key "k": value of`},
		{"env key", func(j *Job) { j.TaskGroups[0].Tasks[0].Env = map[string]string{"A B": "x"} }, `env: key "A B"`},
		{"config depth", func(j *Job) { j.TaskGroups[0].Tasks[0].Config = deep }, "config: key \"x.x.x"},
		{"config elements", func(j *Job) { j.TaskGroups[0].Tasks[0].Config = wide }, "config: more than 10000 values"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := boundsJob()
			tc.change(j)
			err := j.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want ErrInvalid naming %q", err, tc.want)
			}
		})
	}

	j := boundsJob()
	j.Namespace = "team-a"
	j.Datacenters = []string{"dc1", "eu-west-*"}
	j.Name = "Train GPT (8x H200)"
	task := j.TaskGroups[0].Tasks[0]
	task.KillTimeout = time.Hour
	task.Resources = &Resources{CPU: 1_400_000, MemoryMB: 2 << 20, Devices: []*RequestedDevice{{Name: "nvidia/gpu", Count: 8}}}
	j.TaskGroups = append(j.TaskGroups, &TaskGroup{Name: "share", Count: 8, Tasks: []*Task{{Name: "t", Driver: "native",
		Config:    map[string]interface{}{"command": "/bin/true"},
		Resources: &Resources{CPU: 100, MemoryMB: 100, Devices: []*RequestedDevice{{Name: "nvidia/gpu", Count: 1, MemoryMB: 141 << 10}}}}}})
	j.Canonicalize()
	if err := j.Validate(); err != nil {
		t.Fatalf("big GPU job refused: %v", err)
	}
}

func TestValidateNodeFields(t *testing.T) {
	ok := &Node{ID: "0b9f8a7e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", Name: "gpu-01.example.com", Datacenter: "dc1",
		Attributes: map[string]string{"cpu.arch": "amd64"}, Meta: map[string]string{"rack": "r1"}}
	if err := ok.ValidateNodeFields(); err != nil {
		t.Fatalf("good node refused: %v", err)
	}
	for name, n := range map[string]*Node{
		"ID with slash":   {ID: "../x", Name: "n"},
		"name with space": {ID: "a", Name: "a b"},
		"long name":       {ID: "a", Name: strings.Repeat("n", 129)},
		"meta key":        {ID: "a", Name: "n", Meta: map[string]string{"a\x00": "b"}},
		"datacenter":      {ID: "a", Name: "n", Datacenter: "dc/1"},
	} {
		if err := n.ValidateNodeFields(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: ValidateNodeFields() = %v, want ErrInvalid", name, err)
		}
	}
}

// TestEnvMapNULRefused: a meta or env value with a NUL byte, which can
// never be an environment variable, is refused at submission and at
// dispatch naming the field and key (a dispatch with Meta {"k": "a\x00b"}
// was accepted and its task failed to start with "environment variable
// contains NUL").
func TestEnvMapNULRefused(t *testing.T) {
	cases := map[string]func(j *Job){
		`meta: key "k"`:             func(j *Job) { j.Meta = map[string]string{"k": "a\x00b"} },
		`group "g": meta: key "k"`:  func(j *Job) { j.TaskGroups[0].Meta = map[string]string{"k": "\x00"} },
		`task "t": meta: key "k"`:   func(j *Job) { j.TaskGroups[0].Tasks[0].Meta = map[string]string{"k": "x\x00"} },
		`task "t": env: key "PATH"`: func(j *Job) { j.TaskGroups[0].Tasks[0].Env = map[string]string{"PATH": "/bin\x00/evil"} },
	}
	for want, mutate := range cases {
		j := boundsJob()
		mutate(j)
		err := j.Validate()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "NUL") {
			t.Errorf("%s: Validate = %v", want, err)
		}
	}
	j := boundsJob()
	j.ParameterizedJob = &ParameterizedJobConfig{Payload: DispatchPayloadOptional, MetaOptional: []string{"k"}}
	if err := j.DispatchProblems(nil, map[string]string{"k": "a\nb\x00"}, ""); err == nil || !strings.Contains(err.Error(), `Meta: key "k": value contains a NUL byte`) {
		t.Fatalf("dispatch with a NUL in meta: %v", err)
	}
	if err := j.DispatchProblems(nil, map[string]string{"k": "a\nNOMAD_TOKEN=x"}, ""); err != nil {
		t.Fatalf("a newline is a valid value: %v", err)
	}
}
