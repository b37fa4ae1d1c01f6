package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/hashicorp/hcl/v2"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenCases lists every jobspec that must parse, with its golden file:
// testdata/*.hcl next to their goldens, and the examples under
// testdata/examples/.
func goldenCases(t *testing.T) map[string]string {
	t.Helper()
	cases := make(map[string]string)
	local, err := filepath.Glob("testdata/*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range local {
		cases[p] = strings.TrimSuffix(p, ".hcl") + ".golden.json"
	}
	examples, err := filepath.Glob("../../examples/*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range examples {
		if filepath.Base(p) == "bad.hcl" {
			continue
		}
		cases[p] = filepath.Join("testdata", "examples", strings.TrimSuffix(filepath.Base(p), ".hcl")+".golden.json")
	}
	if len(local) < 5 || len(examples) < 4 {
		t.Fatalf("found %d testdata jobspecs and %d examples; want at least 5 and 4", len(local), len(examples))
	}
	return cases
}

func TestParseGolden(t *testing.T) {
	for path, golden := range goldenCases(t) {
		t.Run(path, func(t *testing.T) {
			job, err := ParseFile(path, nil)
			if err != nil {
				t.Fatalf("ParseFile: %v", err)
			}
			got, err := json.MarshalIndent(job, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s (run go test -update after checking the change):\n%s", path, golden, got)
			}
			// The golden JSON decodes back into the same job.
			var back api.Job
			if err := json.Unmarshal(want, &back); err != nil {
				t.Fatal(err)
			}
			if back.ID != job.ID || len(back.TaskGroups) != len(job.TaskGroups) {
				t.Errorf("golden round trip: got ID %q with %d groups, want %q with %d", back.ID, len(back.TaskGroups), job.ID, len(job.TaskGroups))
			}
		})
	}
}

func mustParse(t *testing.T, path string, vars map[string]string) *api.Job {
	t.Helper()
	job, err := ParseFile(path, vars)
	if err != nil {
		t.Fatalf("ParseFile(%s): %v", path, err)
	}
	return job
}

func TestParseDefaults(t *testing.T) {
	job := mustParse(t, "testdata/minimal.hcl", nil)
	want := &api.Job{
		ID:          "minimal",
		Name:        "minimal",
		Type:        "service",
		Priority:    50,
		Datacenters: []string{"dc1"},
		TaskGroups: []*api.TaskGroup{{
			Name:  "g",
			Count: 1,
			Tasks: []*api.Task{{Name: "t", Driver: "native"}},
		}},
	}
	if !reflect.DeepEqual(job, want) {
		g, _ := json.Marshal(job)
		w, _ := json.Marshal(want)
		t.Errorf("got\n%s\nwant\n%s", g, w)
	}
}

func TestParseFull(t *testing.T) {
	job := mustParse(t, "testdata/full.hcl", nil)
	tests := []struct {
		name      string
		got, want interface{}
	}{
		{"ID", job.ID, "hello-gpu"},
		{"Type", job.Type, "batch"},
		{"Priority", job.Priority, 70},
		{"Namespace", job.Namespace, "research"},
		{"Datacenters", job.Datacenters, []string{"dc1", "dc2"}},
		{"Meta", job.Meta, map[string]string{"owner": "me", "image": "x"}},
		{"Constraint 0", *job.Constraints[0], api.Constraint{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}},
		{"Constraint default operator", *job.Constraints[1], api.Constraint{LTarget: "${node.class}", Operand: "=", RTarget: "gpu"}},
		{"Affinity", *job.Affinities[0], api.Affinity{LTarget: "${meta.rack}", Operand: "!=", RTarget: "r1", Weight: -30}},
		{"group count", job.TaskGroups[0].Count, 2},
		{"group meta attribute", job.TaskGroups[0].Meta, map[string]string{"stage": "train"}},
		{"restart", *job.TaskGroups[0].RestartPolicy, api.RestartPolicy{Attempts: 2, Delay: 5 * time.Second, Interval: time.Minute, Mode: "fail"}},
		{"group affinity default weight", job.TaskGroups[0].Affinities[0].Weight, 50},
		{"task kill timeout", job.TaskGroups[0].Tasks[0].KillTimeout, 10 * time.Second},
		{"task kill signal", job.TaskGroups[0].Tasks[0].KillSignal, "SIGINT"},
		{"task config", job.TaskGroups[0].Tasks[0].Config, map[string]interface{}{"command": "/bin/sh", "args": []interface{}{"-c", "echo hi"}}},
		{"task env converts", job.TaskGroups[0].Tasks[0].Env, map[string]string{"FOO": "bar", "GPUS": "1", "DEBUG": "true"}},
		{"task meta", job.TaskGroups[0].Tasks[0].Meta, map[string]string{"role": "leader"}},
		{"cpu MHz", job.TaskGroups[0].Tasks[0].Resources.CPU, 500},
		{"memory MiB", job.TaskGroups[0].Tasks[0].Resources.MemoryMB, 256},
		{"device", job.TaskGroups[0].Tasks[0].Resources.Devices[0].Name, "nvidia/gpu"},
		{"device count from var", job.TaskGroups[0].Tasks[0].Resources.Devices[0].Count, 1},
		{"device constraint", *job.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints[0], api.Constraint{LTarget: "${device.attr.memory}", Operand: ">=", RTarget: "40 GiB"}},
		{"device affinity", *job.TaskGroups[0].Tasks[0].Resources.Devices[0].Affinities[0], api.Affinity{LTarget: "${device.model}", Operand: "=", RTarget: "H100", Weight: 50}},
		{"empty device block count", job.TaskGroups[0].Tasks[0].Resources.Devices[1].Count, 1},
		{"config attribute form", job.TaskGroups[0].Tasks[1].Config, map[string]interface{}{"image": "busybox:1.36"}},
		{"no resources block", job.TaskGroups[0].Tasks[1].Resources, (*api.Resources)(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestParseVariables(t *testing.T) {
	tests := []struct {
		name      string
		vars      map[string]string
		dcs       []string
		meta      map[string]string
		count     int
		cpu, mem  int
		devices   int
		firstArgs []interface{}
	}{
		{
			name:      "defaults",
			dcs:       []string{"dc1", "dc9"},
			meta:      map[string]string{"label": "TRAINER-2", "joined": "dc1,dc9", "lowered": "trainer", "debug": "false", "first": "dc1"},
			count:     2,
			cpu:       500,
			mem:       2048,
			devices:   2,
			firstArgs: []interface{}{"dc=dc1", "dc=dc9"},
		},
		{
			name:      "overrides",
			vars:      map[string]string{"name": "x", "gpus": "4", "dcs": `["a", "b"]`, "debug": "true"},
			dcs:       []string{"a", "b", "dc9"},
			meta:      map[string]string{"label": "X-4", "joined": "a,b,dc9", "lowered": "x", "debug": "true", "first": "a"},
			count:     3,
			cpu:       1000,
			mem:       4096,
			devices:   4,
			firstArgs: []interface{}{"dc=a", "dc=b", "dc=dc9"},
		},
		{
			name:      "empty list makes try fall back",
			vars:      map[string]string{"dcs": `[]`, "gpus": "0"},
			dcs:       []string{"dc9"},
			meta:      map[string]string{"label": "TRAINER-0", "joined": "dc9", "lowered": "trainer", "debug": "false", "first": "none"},
			count:     0,
			cpu:       100,
			mem:       0,
			devices:   0,
			firstArgs: []interface{}{"dc=dc9"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := mustParse(t, "testdata/variables.hcl", tt.vars)
			task := job.TaskGroups[0].Tasks[0]
			if !reflect.DeepEqual(job.Datacenters, tt.dcs) {
				t.Errorf("Datacenters = %q, want %q", job.Datacenters, tt.dcs)
			}
			if !reflect.DeepEqual(job.Meta, tt.meta) {
				t.Errorf("Meta = %q, want %q", job.Meta, tt.meta)
			}
			if got := job.TaskGroups[0].Count; got != tt.count {
				t.Errorf("Count = %d, want %d", got, tt.count)
			}
			if task.Resources.CPU != tt.cpu || task.Resources.MemoryMB != tt.mem {
				t.Errorf("CPU, MemoryMB = %d, %d; want %d, %d", task.Resources.CPU, task.Resources.MemoryMB, tt.cpu, tt.mem)
			}
			if got := task.Resources.Devices[0].Count; got != tt.devices {
				t.Errorf("device Count = %d, want %d", got, tt.devices)
			}
			if got := task.Config["args"]; !reflect.DeepEqual(got, tt.firstArgs) {
				t.Errorf("args = %#v, want %#v", got, tt.firstArgs)
			}
		})
	}
}

func TestParseRuntimeInterpolations(t *testing.T) {
	job := mustParse(t, "testdata/runtime.hcl", map[string]string{"rack": "r9"})
	task := job.TaskGroups[0].Tasks[0]
	tests := []struct {
		name      string
		got, want interface{}
	}{
		{"through a local", job.Constraints[0].LTarget, "${attr.kernel.name}"},
		{"meta root kept, var evaluated", *job.Constraints[1], api.Constraint{LTarget: "${meta.rack}", Operand: "=", RTarget: "r9"}},
		{"spaces inside the interpolation dropped", job.Constraints[2].LTarget, "${attr.unique.hostname}"},
		{"var inside a longer template", job.Constraints[2].RTarget, "gpu-r9-[0-9]+"},
		{"mixed template", task.Config["args"], []interface{}{"-c", "echo ${NOMAD_ALLOC_ID} ${GPULAYER_ALLOC_INDEX} on ${node.unique.name} in r9"}},
		{"escapes stay escapes", task.Config["escaped"], "${var.rack} and ${attr.x}"},
		{"env root", task.Config["env_ref"], "${env.HOME}/data"},
		{"heredoc", task.Config["heredoc"], "alloc ${NOMAD_ALLOC_ID}\nrack r9\n"},
		{"env block", task.Env["DEVICE"], "${device.ids}"},
		{"device constraint", task.Resources.Devices[0].Constraints[0].LTarget, "${device.attr.memory}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestParseConfigValues(t *testing.T) {
	job := mustParse(t, "testdata/config.hcl", nil)
	cfg := job.TaskGroups[0].Tasks[0].Config
	want := map[string]interface{}{
		"image":      "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04",
		"args":       []interface{}{"nvidia-smi", "-L"},
		"privileged": false,
		"shm_mb":     64,
		"ratio":      0.5,
		"big":        1e30,
		"ports":      map[string]interface{}{"http": 8080, "grpc": 9090},
		"labels":     map[string]interface{}{"com.example/team": "ml"},
		"nested":     []interface{}{[]interface{}{1, 2}, map[string]interface{}{"a": nil, "b": []interface{}{}}},
		"mount": []interface{}{
			map[string]interface{}{"type": "bind", "source": "/data", "target": "/data"},
			map[string]interface{}{"type": "tmpfs", "target": "/scratch"},
		},
		"logging": []interface{}{map[string]interface{}{"type": "json-file"}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Config = %#v\nwant %#v", cfg, want)
	}
}

var diagLine = regexp.MustCompile(`^bad\.hcl:\d+:\d+: \S`)

func TestParseErrors(t *testing.T) {
	const task = `job "j" {
  group "g" {
    task "t" {
      driver = "native"
%s
    }
  }
}
`
	tests := []struct {
		name string
		src  string
		vars map[string]string
		// want are substrings of the error; the first names the position.
		want []string
	}{
		{"empty file", ``, nil, []string{"bad.hcl:1:1: Missing job block"}},
		{"no job", `variable "x" { default = 1 }`, nil, []string{"bad.hcl:1:1: Missing job block"}},
		{"two jobs", "job \"a\" {}\njob \"b\" {}\n", nil, []string{"bad.hcl:2:1: Duplicate job block", "bad.hcl:1:1"}},
		{"missing closing brace", "job \"a\" {\n  group \"g\" {\n    count = 1\n}\n", nil, []string{"bad.hcl:1:9: Unclosed configuration block"}},
		{"missing job label", "job {\n}\n", nil, []string{"bad.hcl:1:5: Missing name for job"}},
		{"garbage", "job \"a\" { = }", nil, []string{"bad.hcl:1:11: Argument or block definition required"}},
		{"wrong type memory", strings.Replace(task, "%s", "      resources {\n        memory = \"lots\"\n      }", 1), nil,
			[]string{"bad.hcl:6:18: Incorrect attribute value type", `attribute "memory"`, "a number is required"}},
		{"wrong type count list", "job \"j\" {\n  group \"g\" {\n    count = [1]\n  }\n}\n", nil,
			[]string{"bad.hcl:3:13: Incorrect attribute value type", `"count"`}},
		{"non-integer count", "job \"j\" {\n  group \"g\" {\n    count = 1.5\n  }\n}\n", nil,
			[]string{"bad.hcl:3:13:", `"count"`, "whole number"}},
		{"huge count", "job \"j\" {\n  group \"g\" {\n    count = 1e12\n  }\n}\n", nil,
			[]string{"bad.hcl:3:13:", `"count"`, "out of range"}},
		{"unknown attribute", strings.Replace(task, "%s", "      image = \"x\"", 1), nil,
			[]string{"bad.hcl:5:7: Unsupported argument", `"image"`}},
		{"unknown block", strings.Replace(task, "%s", "      template {\n      }", 1), nil,
			[]string{"bad.hcl:5:7: Unsupported block type", `"template"`}},
		{"artifact without source", strings.Replace(task, "%s", "      artifact {\n      }", 1), nil,
			[]string{"bad.hcl:5:16: Missing required argument", `"source"`}},
		{"unknown job attribute", "job \"j\" {\n  region = \"x\"\n}\n", nil, []string{"bad.hcl:2:3: Unsupported argument", `"region"`}},
		{"bad duration", strings.Replace(task, "%s", "      kill_timeout = \"5 parsecs\"", 1), nil,
			[]string{"bad.hcl:5:22: Invalid duration", `"kill_timeout"`}},
		{"duration without unit", "job \"j\" {\n  group \"g\" {\n    restart {\n      delay = 5\n    }\n  }\n}\n", nil,
			[]string{"bad.hcl:4:15: Invalid duration", `"delay"`, "missing unit"}},
		{"negative device count", strings.Replace(task, "%s", "      resources {\n        device \"nvidia/gpu\" {\n          count = -1\n        }\n      }", 1), nil,
			[]string{"bad.hcl:7:19: Invalid device count", "nvidia/gpu", "-1"}},
		{"fractional device count", strings.Replace(task, "%s", "      resources {\n        device \"nvidia/gpu\" {\n          count = 0.5\n        }\n      }", 1), nil,
			[]string{"bad.hcl:7:19:", `"count"`, "whole number"}},
		{"duplicate resources", strings.Replace(task, "%s", "      resources {}\n      resources {}", 1), nil,
			[]string{"bad.hcl:6:7: Duplicate resources block"}},
		{"meta block and attribute", "job \"j\" {\n  meta = {}\n  meta {\n  }\n}\n", nil, []string{"bad.hcl:3:3: Duplicate meta"}},
		{"config block with label", strings.Replace(task, "%s", "      config {\n        mount \"x\" {}\n      }", 1), nil,
			[]string{"bad.hcl:6:15: Unexpected block label"}},
		{"env list value", strings.Replace(task, "%s", "      env {\n        A = [1]\n      }", 1), nil,
			[]string{"bad.hcl:6:13: Incorrect attribute value type", `"A"`}},
		{"unknown variable passed", `job "j" {}`, map[string]string{"nope": "1"}, []string{"bad.hcl:1:1: Undeclared variable", `"nope"`}},
		{"undeclared var reference", "job \"j\" {\n  type = var.nope\n}\n", nil, []string{"bad.hcl:2:13: Unsupported attribute", `"nope"`}},
		{"var value of wrong type", "variable \"n\" {\n  type = number\n  default = 1\n}\njob \"j\" {}\n", map[string]string{"n": "many"},
			[]string{"bad.hcl:1:1: Invalid value for variable", `"n"`, "number"}},
		{"var value that is not HCL", "variable \"l\" {\n  type = list(string)\n}\njob \"j\" {}\n", map[string]string{"l": "[a,"},
			[]string{"bad.hcl:1:1: Invalid value for variable", `variable "l"`}},
		{"default of wrong type", "variable \"n\" {\n  type = number\n  default = \"x\"\n}\njob \"j\" {}\n", nil,
			[]string{"bad.hcl:3:13: Invalid default value for variable", `"n"`}},
		{"variable without value", "variable \"n\" {}\njob \"j\" {}\n", nil, []string{"bad.hcl:1:1: Missing variable value", `"n"`}},
		{"unknown variable attribute", "variable \"n\" {\n  default = 1\n  sensitive = true\n}\njob \"j\" {}\n", nil,
			[]string{"bad.hcl:3:3: Unsupported argument", `"sensitive"`}},
		{"bad type expression", "variable \"n\" {\n  type = numbr\n}\njob \"j\" {}\n", nil, []string{"bad.hcl:2:10: Invalid type specification"}},
		{"locals cycle", "locals {\n  a = local.b\n  b = local.a\n}\njob \"j\" {}\n", nil,
			[]string{"bad.hcl:2:7: Cycle in local values", `"a"`, "bad.hcl:3:7: Cycle in local values"}},
		{"duplicate local", "locals {\n  a = 1\n}\nlocals {\n  a = 2\n}\njob \"j\" {}\n", nil, []string{"bad.hcl:5:3: Duplicate local value", "bad.hcl:2:3"}},
		{"bare runtime root", "job \"j\" {\n  constraint {\n    attribute = attr.kernel.name\n  }\n}\n", nil,
			[]string{"bad.hcl:3:17: Unknown variable", `"attr"`}},
		{"runtime root in directive", "job \"j\" {\n  type = \"%{ if attr.x == \"a\" }b%{ endif }\"\n}\n", nil,
			[]string{"bad.hcl:2:", "Unsupported runtime reference", `"attr"`}},
		{"unknown function", "job \"j\" {\n  type = nosuch(1)\n}\n", nil, []string{"bad.hcl:2:10: Call to unknown function", `"nosuch"`}},
		{"infinite config number", strings.Replace(task, "%s", "      config {\n        x = 1e400\n      }", 1), nil,
			[]string{"bad.hcl:6:13: Number too large", "±308"}},
		{"config number out of range", strings.Replace(task, "%s", "      config {\n        x = 1e300 * 1e300\n      }", 1), nil,
			[]string{"bad.hcl:6:13: Incorrect attribute value type", `"x"`, "out of range"}},
		{"several errors sorted", "job \"j\" {\n  priority = \"high\"\n  group \"g\" {\n    count = \"many\"\n  }\n}\n", nil,
			[]string{"bad.hcl:2:14: Incorrect attribute value type: Inappropriate value for attribute \"priority\"", "\nbad.hcl:4:13: Incorrect attribute value type: Inappropriate value for attribute \"count\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := Parse("bad.hcl", []byte(tt.src), tt.vars)
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want an error", job)
			}
			if job != nil {
				t.Errorf("Parse returned a job with its error")
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error is %T, want *jobspec.Error: %v", err, err)
			}
			var diags hcl.Diagnostics
			if !errors.As(err, &diags) || !diags.HasErrors() {
				t.Errorf("errors.As to hcl.Diagnostics failed")
			}
			msg := err.Error()
			lines := strings.Split(msg, "\n")
			if len(lines) != len(perr.Diagnostics) {
				t.Errorf("%d lines for %d diagnostics:\n%s", len(lines), len(perr.Diagnostics), msg)
			}
			for _, line := range lines {
				if !diagLine.MatchString(line) {
					t.Errorf("line %q does not read file:line:col: message", line)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q:\n%s", w, msg)
				}
			}
		})
	}
}

func TestParseBadExample(t *testing.T) {
	_, err := ParseFile("../../examples/bad.hcl", nil)
	if err == nil {
		t.Fatal("examples/bad.hcl parsed; it must fail")
	}
	want := `../../examples/bad.hcl:20:18: Incorrect attribute value type: Inappropriate value for attribute "memory": a number is required.`
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
}

func TestParseFileMissing(t *testing.T) {
	_, err := ParseFile(filepath.Join(t.TempDir(), "nope.hcl"), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want fs.ErrNotExist", err)
	}
}

func TestParseDoesNotMutateVars(t *testing.T) {
	vars := map[string]string{"gpus": "3"}
	job := mustParse(t, "testdata/full.hcl", vars)
	if got := job.TaskGroups[0].Tasks[0].Resources.Devices[0].Count; got != 3 {
		t.Errorf("device count = %d, want 3 from vars", got)
	}
	if len(vars) != 1 || vars["gpus"] != "3" {
		t.Errorf("vars changed to %v", vars)
	}
}

// TestParseResourceDefaults checks that a resources block that leaves out
// cpu or memory gets Nomad's defaults (100 MHz, 300 MiB), while an
// explicit 0 stays 0 (no limit).
func TestParseResourceDefaults(t *testing.T) {
	cases := []struct {
		name, body  string
		cpu, memory int
	}{
		{"devices only", `device "nvidia/gpu" {}`, 100, 300},
		{"cpu only", `cpu = 500`, 500, 300},
		{"memory only", `memory = 64`, 100, 64},
		{"explicit zeros", "cpu = 0\nmemory = 0", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := "job \"j\" {\n group \"g\" {\n  task \"t\" {\n   driver = \"native\"\n   config { command = \"/bin/true\" }\n   resources {\n" + c.body + "\n   }\n  }\n }\n}\n"
			job, err := Parse("defaults.hcl", []byte(src), nil)
			if err != nil {
				t.Fatal(err)
			}
			r := job.TaskGroups[0].Tasks[0].Resources
			if r.CPU != c.cpu || r.MemoryMB != c.memory {
				t.Fatalf("cpu %d memory %d, want %d and %d", r.CPU, r.MemoryMB, c.cpu, c.memory)
			}
		})
	}
}
