package structs

import (
	"strings"
	"testing"
	"time"
)

func serviceJob() *Job {
	j := &Job{ID: "web", TaskGroups: []*TaskGroup{{
		Name: "api", Count: 1,
		Networks: []*NetworkResource{{DynamicPorts: []Port{{Label: "http", To: 8000}}, ReservedPorts: []Port{{Label: "admin", Value: 9090}}}},
		Services: []*Service{{Name: "api", PortLabel: "http", Checks: []*ServiceCheck{
			{Type: ServiceCheckHTTP, Path: "/health", Interval: time.Second, Timeout: time.Second},
			{Type: ServiceCheckScript, Command: "/bin/true", TaskName: "server", Interval: time.Second, Timeout: time.Second},
		}}},
		Tasks: []*Task{{Name: "server", Driver: "native", Config: map[string]interface{}{"command": "/bin/true"},
			Services: []*Service{{Name: "admin", PortLabel: "admin", Checks: []*ServiceCheck{{Type: ServiceCheckTCP, Interval: time.Second, Timeout: time.Second}}}}}},
	}}}
	j.Canonicalize()
	return j
}

func TestServiceValidate(t *testing.T) {
	if err := serviceJob().Validate(); err != nil {
		t.Fatalf("valid job: %v", err)
	}
	if got := serviceJob().TaskGroups[0].Tasks[0].Services[0].TaskName; got != "server" {
		t.Fatalf("task service TaskName = %q", got)
	}
	cases := []struct {
		name   string
		mutate func(tg *TaskGroup)
		want   string
	}{
		{"unknown check type", func(tg *TaskGroup) { tg.Services[0].Checks[0].Type = "grpc" },
			`group "api": service "api": check 1: type: must be "http", "tcp" or "script", got "grpc"`},
		{"negative interval", func(tg *TaskGroup) { tg.Services[0].Checks[0].Interval = -time.Second },
			`service "api": check 1: interval: must not be negative`},
		{"interval too short", func(tg *TaskGroup) { tg.Services[0].Checks[0].Interval = time.Millisecond },
			`interval: must be between 100ms and 1h0m0s`},
		{"port label used twice", func(tg *TaskGroup) { tg.Networks[0].ReservedPorts[0].Label = "http" },
			`network: port "http": label used twice`},
		{"unknown service port", func(tg *TaskGroup) { tg.Services[0].PortLabel = "nope" },
			`service "api": port: "nope" is not a port of the group's network block`},
		{"http check path with CRLF", func(tg *TaskGroup) { tg.Services[0].Checks[0].Path = "/health\r\nHost: evil" },
			`path: must not hold spaces or control characters`},
		{"http check without path", func(tg *TaskGroup) { tg.Services[0].Checks[0].Path = "" }, `path: an http check needs a path`},
		{"group script check without task", func(tg *TaskGroup) { tg.Services[0].Checks[1].TaskName = "" }, `task: a group service's script check must name the task`},
		{"script check in an unknown task", func(tg *TaskGroup) { tg.Services[0].Checks[1].TaskName = "x" }, `task: "x" is not a task of the group`},
		{"consul provider", func(tg *TaskGroup) { tg.Services[0].Provider = "consul" }, `provider: must be "gpulayer" or "nomad"`},
		{"bridge mode", func(tg *TaskGroup) { tg.Networks[0].Mode = "bridge" }, `network: mode: only "host"`},
		{"static port out of range", func(tg *TaskGroup) { tg.Networks[0].ReservedPorts[0].Value = 70000 }, `static: must be 1-65535`},
		{"two network blocks", func(tg *TaskGroup) { tg.Networks = append(tg.Networks, &NetworkResource{}) }, `at most one network block`},
		{"bad port label", func(tg *TaskGroup) { tg.Networks[0].DynamicPorts[0].Label = "a-b" }, `label "a-b" must be 1-64 letters`},
		{"tcp check without port", func(tg *TaskGroup) { tg.Tasks[0].Services[0].PortLabel = "" }, `task "server": service "admin": check 1: port: a tcp check needs a port`},
		{"too many tags", func(tg *TaskGroup) { tg.Services[0].Tags = make([]string, MaxServiceTags+1) }, `tags: at most 32`},
		{"same service twice on one port", func(tg *TaskGroup) { tg.Services = append(tg.Services, tg.Services[0].Copy()) },
			`service "api": defined twice on port "http" here`},
		{"bad service name", func(tg *TaskGroup) { tg.Services[0].Name = "a b" }, `service 1: name: "a b" is not a service name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := serviceJob()
			tc.mutate(j.TaskGroups[0])
			err := j.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestServiceCopyIsDeep(t *testing.T) {
	j := serviceJob()
	c := j.Copy()
	c.TaskGroups[0].Services[0].Checks[0].Path = "/x"
	c.TaskGroups[0].Networks[0].DynamicPorts[0].Label = "y"
	c.TaskGroups[0].Tasks[0].Services[0].Name = "z"
	if j.TaskGroups[0].Services[0].Checks[0].Path != "/health" || j.TaskGroups[0].Networks[0].DynamicPorts[0].Label != "http" ||
		j.TaskGroups[0].Tasks[0].Services[0].Name != "admin" {
		t.Fatal("copy shares service or network state")
	}
	a := &Allocation{AllocatedResources: &AllocatedResources{Shared: &AllocatedSharedResources{Ports: []AllocatedPortMapping{{Label: "http", Value: 1}}}}}
	ac := a.Copy()
	ac.AllocatedResources.Shared.Ports[0].Value = 2
	if a.AllocatedResources.Shared.Ports[0].Value != 1 {
		t.Fatal("alloc copy shares ports")
	}
}

func TestServiceRegistrationValidate(t *testing.T) {
	ok := &ServiceRegistration{ID: "x", ServiceName: "web", AllocID: "a", Namespace: "default", Port: 80}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*ServiceRegistration{
		{ServiceName: "web", AllocID: "a", Namespace: "default"},
		{ID: "x", ServiceName: "web", Namespace: "default"},
		{ID: "x", ServiceName: "web", AllocID: "a"},
		{ID: "x", ServiceName: "-", AllocID: "a", Namespace: "default"},
		{ID: "x", ServiceName: "web", AllocID: "a", Namespace: "default", Port: 70000},
		{ID: "x", ServiceName: "web", AllocID: "a", Namespace: "default", Tags: []string{""}},
	} {
		if err := bad.Validate(); err == nil {
			t.Fatalf("%+v validated", bad)
		}
	}
}

func TestParsePortRanges(t *testing.T) {
	got, err := ParsePortRanges(" 22, 80,8000-8002 ,80,")
	if err != nil || len(got) != 5 || got[0] != 22 || got[1] != 80 || got[4] != 8002 {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := ParsePortRanges(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	for _, bad := range []string{"0", "65536", "a", "10-5", "1-2-3", "-5", "8000-", strings.Repeat("1,", 600), "+80", "99999999999"} {
		if _, err := ParsePortRanges(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParsePortRanges(f *testing.F) {
	for _, s := range []string{"22,80,8000-8080", "", "1-65535", "10-5", " 7 , 8-9 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		ports, err := ParsePortRanges(spec)
		if err != nil {
			return
		}
		for i, p := range ports {
			if p < 1 || p > MaxValidPort || (i > 0 && ports[i-1] >= p) {
				t.Fatalf("%q gave %v", spec, ports)
			}
		}
	})
}
