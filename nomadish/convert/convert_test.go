package convert

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/jobspec"
	"github.com/gpulayer/gpulayer/structs"
)

// fill sets every field reachable from v (a pointer) to a non-zero value,
// so that a field one conversion forgets shows up as a difference. Slices
// get two elements, maps two keys; seed makes values differ.
func fill(t *testing.T, v reflect.Value, seed *int) {
	t.Helper()
	*seed++
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(t, v.Elem(), seed)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), seed)
			}
		}
	case reflect.String:
		v.SetString("s" + time.Duration(*seed).String())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*seed))
	case reflect.Uint64, reflect.Uint8:
		v.SetUint(uint64(*seed))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(t, s.Index(i), seed)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := 0; i < 2; i++ {
			k := reflect.New(v.Type().Key()).Elem()
			fill(t, k, seed)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(t, e, seed)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		// Driver config values: JSON-like, nested.
		v.Set(reflect.ValueOf(map[string]interface{}{
			"n":    float64(*seed),
			"list": []interface{}{"a", true, map[string]interface{}{"x": "y"}},
		}))
	default:
		t.Fatalf("fill: unhandled kind %s (%s); teach the test about it", v.Kind(), v.Type())
	}
}

func fullAPIJob(t *testing.T) *api.Job {
	var j api.Job
	seed := 0
	fill(t, reflect.ValueOf(&j), &seed)
	return &j
}

func fullStructsJob(t *testing.T) *structs.Job {
	var j structs.Job
	seed := 100
	fill(t, reflect.ValueOf(&j), &seed)
	return &j
}

func TestRoundTripFromAPI(t *testing.T) {
	in := fullAPIJob(t)
	// Region is checked at the HTTP layer (GPUlayer has one) and filled
	// again by JobRead; structs does not hold it. NodePool travels.
	in.Region = ""
	got := JobFromStructs(JobToStructs(in))
	if !reflect.DeepEqual(got, in) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(in)
		t.Errorf("api -> structs -> api lost something:\ngot  %s\nwant %s", g, w)
	}
}

func TestRoundTripFromStructs(t *testing.T) {
	in := fullStructsJob(t)
	got := JobToStructs(JobFromStructs(in))
	if !reflect.DeepEqual(got, in) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(in)
		t.Errorf("structs -> api -> structs lost something (a structs field missing in api?):\ngot  %s\nwant %s", g, w)
	}
}

// TestJSONCompatible checks that JSON written from one side decodes into the
// other to the same value the converter produces.
func TestJSONCompatible(t *testing.T) {
	apiJob := fullAPIJob(t)
	b, err := json.Marshal(apiJob)
	if err != nil {
		t.Fatal(err)
	}
	var viaJSON structs.Job
	if err := json.Unmarshal(b, &viaJSON); err != nil {
		t.Fatal(err)
	}
	if want := JobToStructs(apiJob); !reflect.DeepEqual(&viaJSON, want) {
		t.Errorf("api JSON decoded into structs differs from JobToStructs")
	}

	structsJob := fullStructsJob(t)
	b, err = json.Marshal(structsJob)
	if err != nil {
		t.Fatal(err)
	}
	var back api.Job
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if want := JobFromStructs(structsJob); !reflect.DeepEqual(&back, want) {
		t.Errorf("structs JSON decoded into api differs from JobFromStructs")
	}
}

func TestNilsStayNil(t *testing.T) {
	if JobToStructs(nil) != nil || JobFromStructs(nil) != nil {
		t.Fatal("nil job did not convert to nil")
	}
	in := &api.Job{
		ID:          "j",
		TaskGroups:  []*api.TaskGroup{nil, {Name: "g", Tasks: []*api.Task{nil, {Name: "t", Resources: &api.Resources{Devices: []*api.RequestedDevice{nil}}}}}},
		Constraints: []*api.Constraint{nil},
		Affinities:  []*api.Affinity{},
	}
	out := JobToStructs(in)
	tg := out.TaskGroups[1]
	switch {
	case out.TaskGroups[0] != nil, tg.Tasks[0] != nil, out.Constraints[0] != nil:
		t.Error("a nil element became non-nil")
	case out.Meta != nil, out.Datacenters != nil, tg.RestartPolicy != nil, tg.Tasks[1].Config != nil:
		t.Error("a nil map, slice or pointer became non-nil")
	case out.Affinities == nil || len(out.Affinities) != 0:
		t.Error("an empty slice did not stay empty")
	case tg.Tasks[1].Resources.Devices[0] != nil:
		t.Error("a nil device became non-nil")
	}
	if back := JobFromStructs(out); !reflect.DeepEqual(back, in) {
		t.Errorf("round trip with nils differs")
	}
}

func TestNoSharedState(t *testing.T) {
	in := &api.Job{
		ID:          "j",
		Datacenters: []string{"dc1"},
		Meta:        map[string]string{"a": "b"},
		TaskGroups: []*api.TaskGroup{{Name: "g", Tasks: []*api.Task{{
			Name:   "t",
			Config: map[string]interface{}{"args": []interface{}{"x"}, "nested": map[string]interface{}{"k": "v"}},
		}}}},
	}
	out := JobToStructs(in)
	out.Datacenters[0] = "changed"
	out.Meta["a"] = "changed"
	cfg := out.TaskGroups[0].Tasks[0].Config
	cfg["args"].([]interface{})[0] = "changed"
	cfg["nested"].(map[string]interface{})["k"] = "changed"

	task := in.TaskGroups[0].Tasks[0]
	if in.Datacenters[0] != "dc1" || in.Meta["a"] != "b" ||
		task.Config["args"].([]interface{})[0] != "x" || task.Config["nested"].(map[string]interface{})["k"] != "v" {
		t.Errorf("changing the converted job changed the input: %+v", in)
	}
}

// TestExamplesValidate parses every example jobspec, converts it, and checks
// that the server-side validation accepts it after filling defaults.
func TestExamplesValidate(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 4 {
		t.Fatalf("found %d examples, want at least 4", len(paths))
	}
	for _, p := range paths {
		if filepath.Base(p) == "bad.hcl" {
			continue
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			apiJob, err := jobspec.ParseFile(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			job := JobToStructs(apiJob)
			job.Canonicalize()
			if err := job.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if back := JobFromStructs(job); back.ID != apiJob.ID || len(back.TaskGroups) != len(apiJob.TaskGroups) {
				t.Errorf("JobFromStructs(%s) = %+v", p, back)
			}
		})
	}
}
