package jobspec

import (
	"strings"
	"testing"
)

// gpuJobSrc is a job with the GPU scheduling attributes; %s is replaced by
// the device block's body.
const gpuJobSrc = `job "j" {
  requires     = ["voice"]
  availability = "opportunistic"
  group "g" {
    count        = 2
    gang         = true
    requires     = ["asr"]
    availability = "continuous"
    task "t" {
      driver = "native"
      resources {
        device "nvidia/gpu" {
%s
        }
      }
    }
  }
}
`

func TestParseGPUAttributes(t *testing.T) {
	cases := []struct {
		device string
		want   int
	}{
		{`memory = "20 GiB"`, 20480},
		{`memory = "20GiB"`, 20480},
		{`memory = "512 MiB"`, 512},
		{`memory = 2048`, 2048},
		{`memory = "1.5 GiB"`, 1536},
		{`memory = "1 GB"`, 954},
		{`count = 1`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.device, func(t *testing.T) {
			job, err := Parse("gpu.hcl", []byte(strings.Replace(gpuJobSrc, "%s", tc.device, 1)), nil)
			if err != nil {
				t.Fatal(err)
			}
			tg := job.TaskGroups[0]
			if !tg.Gang || tg.Count != 2 || len(tg.Requires) != 1 || tg.Requires[0] != "asr" || tg.Availability != "continuous" {
				t.Fatalf("group %+v", tg)
			}
			if len(job.Requires) != 1 || job.Requires[0] != "voice" || job.Availability != "opportunistic" {
				t.Fatalf("job requires %v availability %q", job.Requires, job.Availability)
			}
			if got := tg.Tasks[0].Resources.Devices[0].MemoryMB; got != tc.want {
				t.Fatalf("memory %d MiB, want %d", got, tc.want)
			}
		})
	}
}

func TestParseGPUErrors(t *testing.T) {
	cases := []struct {
		name, old, new string
		want           []string
	}{
		{"gang not a bool", "gang         = true", `gang = "yes please"`, []string{"gpu.hcl:6:12:", `"gang"`}},
		{"bad availability", `availability = "continuous"`, `availability = "sometimes"`, []string{"gpu.hcl:8:20: Invalid availability", "sometimes"}},
		{"requires not a list", `requires     = ["asr"]`, `requires = "asr"`, []string{"gpu.hcl:7:", `"requires"`}},
		{"memory unit", "%s", `memory = "20 parsecs"`, []string{"gpu.hcl:13:10: Invalid memory size", `unknown unit "parsecs"`}},
		{"memory not a size", "%s", `memory = "lots"`, []string{"gpu.hcl:13:10: Invalid memory size", `"lots"`}},
		{"memory fractional number", "%s", `memory = 1.5`, []string{"gpu.hcl:13:10:", "whole number"}},
		{"memory list", "%s", `memory = [1]`, []string{"gpu.hcl:13:10:", `"memory"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(gpuJobSrc, tc.old, tc.new, 1)
			src = strings.Replace(src, "%s", "", 1)
			_, err := Parse("gpu.hcl", []byte(src), nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func FuzzParseMemorySize(f *testing.F) {
	for _, s := range []string{"20 GiB", "512MiB", "1.5 gb", "", "GiB", "1e9 TiB", "-1 MiB", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mib, err := parseMemorySize(s)
		if err == nil && mib < 0 {
			t.Fatalf("parseMemorySize(%q) = %d, nil", s, mib)
		}
	})
}
