package structs

import (
	"errors"
	"strings"
	"testing"
)

// endpointJob is a valid service job whose group "llm" declares endpoint
// "llm-70b" in front of 3 native members serving on dynamic port "http".
func endpointJob() *Job {
	j := &Job{ID: "serve", Type: JobTypeService, TaskGroups: []*TaskGroup{{
		Name: "llm", Count: 3,
		Networks: []*NetworkResource{{DynamicPorts: []Port{{Label: "http"}}}},
		Endpoint: &Endpoint{Name: "llm-70b", Port: 9000, Model: "llama-3-70b", Revision: "r1",
			Policy: EndpointPolicyLeastOutstanding, ModelsPath: "/v1/models", MemberPort: "http"},
		Tasks: []*Task{{Name: "server", Driver: "native", Config: map[string]interface{}{"command": "/bin/true"}}},
	}}}
	j.Canonicalize()
	return j
}

func TestEndpointValidate(t *testing.T) {
	if err := endpointJob().Validate(); err != nil {
		t.Fatalf("valid endpoint job: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(j *Job)
		want   string // "" valid
	}{
		{"empty optional fields", func(j *Job) {
			e := j.TaskGroups[0].Endpoint
			e.Revision, e.Policy, e.ModelsPath, e.MemberPort = "", "", "", ""
		}, ""},
		{"name missing", func(j *Job) { j.TaskGroups[0].Endpoint.Name = "" }, `group "llm": endpoint: name: is required`},
		{"name uppercase", func(j *Job) { j.TaskGroups[0].Endpoint.Name = "LLM" }, `group "llm": endpoint: name: "LLM" must be 1-63 lowercase`},
		{"name ends in dash", func(j *Job) { j.TaskGroups[0].Endpoint.Name = "llm-" }, `endpoint: name: "llm-"`},
		{"name 64 bytes", func(j *Job) { j.TaskGroups[0].Endpoint.Name = strings.Repeat("a", 64) }, `endpoint: name:`},
		{"name 63 bytes", func(j *Job) { j.TaskGroups[0].Endpoint.Name = strings.Repeat("a", 63) }, ""},
		{"name with dot", func(j *Job) { j.TaskGroups[0].Endpoint.Name = "llm.70b" }, ""},
		// GET /v1/endpoint/aliases lists the aliases: an endpoint of that
		// name could never be read by name.
		{"name aliases is reserved", func(j *Job) { j.TaskGroups[0].Endpoint.Name = "aliases" }, `endpoint: name: "aliases" is reserved`},
		{"port zero", func(j *Job) { j.TaskGroups[0].Endpoint.Port = 0 }, `group "llm": endpoint: port: must be 1-65535, got 0`},
		{"port too big", func(j *Job) { j.TaskGroups[0].Endpoint.Port = 65536 }, `endpoint: port: must be 1-65535, got 65536`},
		{"port is a static group port", func(j *Job) {
			j.TaskGroups[0].Networks[0].ReservedPorts = []Port{{Label: "admin", Value: 9000}}
		}, `group "llm": endpoint: port: 9000 is also the group's static network port "admin"`},
		{"static member port", func(j *Job) {
			j.TaskGroups[0].Networks[0].ReservedPorts = []Port{{Label: "admin", Value: 9001}}
		}, `endpoint: network: port "admin": is static`},
		{"model missing", func(j *Job) { j.TaskGroups[0].Endpoint.Model = "" }, `group "llm": endpoint: model: is required`},
		{"model too long", func(j *Job) { j.TaskGroups[0].Endpoint.Model = strings.Repeat("m", 257) }, `endpoint: model: must be at most 256 bytes, got 257`},
		{"model with newline", func(j *Job) { j.TaskGroups[0].Endpoint.Model = "a\nb" }, `endpoint: model: "a\nb" must hold printable characters only`},
		{"model not utf-8", func(j *Job) { j.TaskGroups[0].Endpoint.Model = "a\xffb" }, `endpoint: model:`},
		{"revision too long", func(j *Job) { j.TaskGroups[0].Endpoint.Revision = strings.Repeat("r", 129) }, `endpoint: revision: must be at most 128 bytes, got 129`},
		{"revision control char", func(j *Job) { j.TaskGroups[0].Endpoint.Revision = "r\x00" }, `endpoint: revision:`},
		{"policy unknown", func(j *Job) { j.TaskGroups[0].Endpoint.Policy = "random" }, `endpoint: policy: must be "round_robin" or "least_outstanding", got "random"`},
		{"policy round robin", func(j *Job) { j.TaskGroups[0].Endpoint.Policy = EndpointPolicyRoundRobin }, ""},
		{"models path relative", func(j *Job) { j.TaskGroups[0].Endpoint.ModelsPath = "v1/models" }, `endpoint: models_path: "v1/models" must start with "/"`},
		{"models path query", func(j *Job) { j.TaskGroups[0].Endpoint.ModelsPath = "/v1/models?x=1" }, `endpoint: models_path: "/v1/models?x=1" must not hold`},
		{"models path space", func(j *Job) { j.TaskGroups[0].Endpoint.ModelsPath = "/v1/ models" }, `models_path: "/v1/ models" must not hold`},
		// The router's verifier could never build the request: the
		// members would never be admitted, the job accepted.
		{"models path bad escape", func(j *Job) { j.TaskGroups[0].Endpoint.ModelsPath = "/v1/%zz" }, `models_path: "/v1/%zz" is not a valid URL path`},
		{"models path escaped", func(j *Job) { j.TaskGroups[0].Endpoint.ModelsPath = "/v1/m%2Fodels" }, ""},
		{"models path CRLF", func(j *Job) { j.TaskGroups[0].Endpoint.ModelsPath = "/v1\r\nHost: x" }, `models_path:`},
		{"models path too long", func(j *Job) { j.TaskGroups[0].Endpoint.ModelsPath = "/" + strings.Repeat("p", 256) }, `models_path: must be at most 256 bytes, got 257`},
		{"member port unknown", func(j *Job) { j.TaskGroups[0].Endpoint.MemberPort = "grpc" }, `endpoint: member_port: "grpc" is not a port label of the group's network (labels: "http")`},
		{"member port empty with two labels", func(j *Job) {
			j.TaskGroups[0].Endpoint.MemberPort = ""
			j.TaskGroups[0].Networks[0].DynamicPorts = append(j.TaskGroups[0].Networks[0].DynamicPorts, Port{Label: "metrics"})
		}, `endpoint: member_port: is required unless the group's network has exactly one port label, it has 2 ("http", "metrics")`},
		{"member port empty without network", func(j *Job) {
			j.TaskGroups[0].Endpoint.MemberPort = ""
			j.TaskGroups[0].Networks = nil
		}, `member_port: is required unless the group's network has exactly one port label, it has 0 (none)`},
		{"batch job", func(j *Job) { j.Type = JobTypeBatch }, `group "llm": endpoint: an endpoint needs a job of type "service", got "batch"`},
		{"count 1", func(j *Job) { j.TaskGroups[0].Count = 1 }, `group "llm": endpoint: count: a group with an endpoint needs count 2-16, got 1`},
		{"count 17", func(j *Job) { j.TaskGroups[0].Count = 17 }, `endpoint: count: a group with an endpoint needs count 2-16, got 17`},
		{"count 16", func(j *Job) { j.TaskGroups[0].Count = 16 }, ""},
		{"count 2", func(j *Job) { j.TaskGroups[0].Count = 2 }, ""},
		{"gang", func(j *Job) { j.TaskGroups[0].Gang = true }, `endpoint: a gang group cannot declare an endpoint`},
		{"same name twice in the job", func(j *Job) {
			tg := j.TaskGroups[0].Copy()
			tg.Name = "llm2"
			j.TaskGroups = append(j.TaskGroups, tg)
		}, `group "llm2": endpoint: name: "llm-70b" is also the endpoint of group "llm"`},
		{"two groups, two names", func(j *Job) {
			tg := j.TaskGroups[0].Copy()
			tg.Name = "llm2"
			tg.Endpoint.Name = "llm-8b"
			j.TaskGroups = append(j.TaskGroups, tg)
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := endpointJob()
			tc.mutate(j)
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to hold %q", err, tc.want)
			}
		})
	}
}

func TestEndpointDefaults(t *testing.T) {
	j := endpointJob()
	tg := j.TaskGroups[0]
	tg.Endpoint.Policy, tg.Endpoint.ModelsPath, tg.Endpoint.MemberPort = "", "", ""
	if got := tg.Endpoint.EffectivePolicy(); got != EndpointPolicyRoundRobin {
		t.Fatalf("EffectivePolicy = %q", got)
	}
	if got := tg.Endpoint.EffectiveModelsPath(); got != DefaultEndpointModelsPath {
		t.Fatalf("EffectiveModelsPath = %q", got)
	}
	if got := tg.MemberPortLabel(); got != "http" {
		t.Fatalf("MemberPortLabel = %q, want the only label", got)
	}
	c := j.Copy()
	c.TaskGroups[0].Endpoint.Port = 1
	if tg.Endpoint.Port != 9000 {
		t.Fatal("Job.Copy shares the endpoint block")
	}
	if got := j.EndpointNames(); len(got) != 1 || got[0] != "llm-70b" {
		t.Fatalf("EndpointNames = %v", got)
	}
}

// TestJobDiffShowsEndpointChange: a changed endpoint is a line of the
// plan's diff.
func TestJobDiffShowsEndpointChange(t *testing.T) {
	old, cur := endpointJob(), endpointJob()
	cur.TaskGroups[0].Endpoint.Port = 9001
	d := JobDiff(old, cur)
	want := `~ TaskGroups["llm"].Endpoint.Port: 9000 => 9001`
	if len(d) != 1 || d[0] != want {
		t.Fatalf("JobDiff = %q, want [%q]", d, want)
	}
}

func TestAllocsFitEndpointPorts(t *testing.T) {
	n := &Node{ID: "n", NodeResources: &NodeResources{CPU: 10000, MemoryMB: 8192}}
	member := func(id, job, group string, port int) *Allocation {
		return &Allocation{ID: id, Namespace: "default", JobID: job, TaskGroup: group, ClientStatus: AllocClientStatusPending,
			AllocatedResources: &AllocatedResources{
				Tasks:  map[string]*AllocatedTaskResources{"t": {CPU: 10, MemoryMB: 10}},
				Shared: &AllocatedSharedResources{Endpoint: &AllocatedEndpoint{Name: job + "-" + group, Port: port}},
			}}
	}
	task := func(id string, port int) *Allocation {
		return &Allocation{ID: id, Namespace: "default", JobID: "other", TaskGroup: "g", ClientStatus: AllocClientStatusPending,
			AllocatedResources: &AllocatedResources{
				Tasks:  map[string]*AllocatedTaskResources{"t": {CPU: 10, MemoryMB: 10}},
				Shared: &AllocatedSharedResources{Ports: []AllocatedPortMapping{{Label: "http", Value: port}}},
			}}
	}
	cases := []struct {
		name   string
		allocs []*Allocation
		want   string
	}{
		{"members of one endpoint share its port", []*Allocation{member("a1", "j", "g", 9000), member("a2", "j", "g", 9000), member("a3", "j", "g", 9000)}, ""},
		{"two endpoints on one port", []*Allocation{member("a1", "j", "g", 9000), member("b1", "k", "g", 9000)}, `port 9000: held by endpoint "j-g" (alloc a1), also asked by endpoint "k-g" (alloc b1)`},
		{"another group of the same job", []*Allocation{member("a1", "j", "g", 9000), member("b1", "j", "h", 9000)}, `also asked by endpoint "j-h"`},
		{"task port after endpoint", []*Allocation{member("a1", "j", "g", 9000), task("b1", 9000)}, `port 9000: endpoint "j-g" of alloc a1 collides with a port of alloc b1`},
		{"task port before endpoint", []*Allocation{task("a0", 9000), member("a1", "j", "g", 9000)}, `port 9000: endpoint "j-g" of alloc a1 collides with a port of alloc a0`},
		{"out of range", []*Allocation{member("a1", "j", "g", 0)}, `endpoint "j-g": host port 0 is out of range`},
		{"different ports", []*Allocation{member("a1", "j", "g", 9000), member("b1", "k", "g", 9001), task("c1", 9002)}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := AllocsFit(n, tc.allocs)
			if (tc.want == "") != ok || !strings.Contains(reason, tc.want) {
				t.Fatalf("AllocsFit = %v %q, want %q", ok, reason, tc.want)
			}
		})
	}
}
