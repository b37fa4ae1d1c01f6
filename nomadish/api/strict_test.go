package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestCheckFields: a field GPUlayer does not support is refused by name
// when it carries a value and accepted when it is zero (what Nomad's
// client sends for a block left out); unknown fields are warnings.
func TestCheckFields(t *testing.T) {
	cases := []struct {
		name     string
		body     string
		wantErr  string // substring of the *FieldError; "" for none
		warnings []string
	}{
		{"plain job", `{"Job":{"ID":"a","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Config":{"anything":1}}]}]}}`, "", nil},
		{"zero Nomad fields", `{"Job":{"ID":"a","Periodic":null,"ParameterizedJob":null,"Dispatched":false,"Payload":null,"Update":null,"Spreads":[],
			"TaskGroups":[{"Name":"g","Networks":null,"Services":[],"MaxRunDuration":0,"EphemeralDisk":null,
			"Tasks":[{"Name":"t","Services":null,"Leader":false,"Kind":"","Resources":{"CPU":100,"Networks":[],"Cores":0}}]}]},
			"EnforceIndex":false}`, "", nil},
		// Ports and services are wire fields; Nomad's service settings
		// GPUlayer lacks warn, a task resources network is refused.
		{"group network", `{"Job":{"TaskGroups":[{"Name":"g","Networks":[{"DynamicPorts":[{"Label":"http"}]}]}]}}`, "", nil},
		{"task service", `{"Job":{"TaskGroups":[{"Tasks":[{"Name":"t","Services":[{"Name":"web","AddressMode":"auto"}]}]}]}}`, "",
			[]string{"Job.TaskGroups[0].Tasks[0].Services[0].AddressMode: unknown field, ignored"}},
		{"task resources network", `{"Job":{"TaskGroups":[{"Tasks":[{"Name":"t","Resources":{"Networks":[{"MBits":10}]}}]}]}}`,
			"Job.TaskGroups[0].Tasks[0].Resources.Networks: not supported", nil},
		{"spreads", `{"Job":{"ID":"a","Spreads":[{"Attribute":"${node.datacenter}","Weight":50}]}}`, "Job.Spreads: not supported by GPUlayer: spread blocks", nil},
		{"task lifecycle", `{"Job":{"ID":"a","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Lifecycle":{"Hook":"prestart"}}]}]}}`, "Job.TaskGroups[0].Tasks[0].Lifecycle: not supported", nil},
		{"update with Nomad's stagger", `{"Job":{"Update":{"MaxParallel":1,"Stagger":30000000000},"TaskGroups":[{"Update":{"Canary":1,"Stagger":1}}]}}`, "", nil},
		{"version tag", `{"Job":{"VersionTag":{"Name":"v1"}}}`, "Job.VersionTag: not supported", nil},
		{"case-insensitive key", `{"job":{"spreads":[{"attribute":"x"}]}}`, "Job.spreads: not supported", nil},
		{"enforce index", `{"Job":{"ID":"a"},"EnforceIndex":true}`, "EnforceIndex: not supported", nil},
		{"unknown field warns", `{"Job":{"ID":"a","Frobnicate":3,"TaskGroups":[{"Name":"g","Wat":{"x":1}}]}}`, "",
			[]string{"Job.Frobnicate: unknown field, ignored", "Job.TaskGroups[0].Wat: unknown field, ignored"}},
		{"unknown zero is quiet", `{"Job":{"ID":"a","Frobnicate":null,"Other":""}}`, "", nil},
		{"warn entry", `{"Job":{"TaskGroups":[{"EphemeralDisk":{"SizeMB":300}}]}}`, "",
			[]string{"Job.TaskGroups[0].EphemeralDisk: GPUlayer does not reserve disk; the block is ignored"}},
		{"ignored entry", `{"Job":{"ID":"a"},"Submission":{"Source":"job \"a\" {}","Format":"hcl2"}}`, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var req JobRegisterRequest
			if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
				t.Fatal(err)
			}
			warnings, err := CheckFields([]byte(tc.body), &req, "")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
			} else {
				var fe *FieldError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want a *FieldError with %q", err, tc.wantErr)
				}
				return
			}
			if !reflect.DeepEqual(warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", warnings, tc.warnings)
			}
		})
	}
}

// TestUnsupportedFieldsAreNotWireFields: an entry of UnsupportedFields
// whose field the wire type has gained would never be consulted; delete
// the entry when the feature lands. Owners must be wire types.
func TestUnsupportedFieldsAreNotWireFields(t *testing.T) {
	owners := map[string]reflect.Type{}
	for _, v := range []interface{}{Job{}, TaskGroup{}, Task{}, Resources{}, TaskArtifact{}, RestartPolicy{}, JobRegisterRequest{},
		UpdateStrategy{}} {
		owners[reflect.TypeOf(v).Name()] = reflect.TypeOf(v)
	}
	seen := map[string]bool{}
	for _, u := range UnsupportedFields {
		typ, ok := owners[u.Owner]
		if !ok {
			t.Errorf("entry %s.%s: owner is not a checked wire type", u.Owner, u.Field)
			continue
		}
		if _, has := jsonFields(typ)[strings.ToLower(u.Field)]; has {
			t.Errorf("entry %s.%s: the wire type has the field now; delete the entry", u.Owner, u.Field)
		}
		if u.Kind != Ignore && u.Reason == "" {
			t.Errorf("entry %s.%s has no Reason", u.Owner, u.Field)
		}
		key := u.Owner + "." + strings.ToLower(u.Field)
		if seen[key] {
			t.Errorf("entry %s.%s listed twice", u.Owner, u.Field)
		}
		seen[key] = true
	}
}

// FuzzCheckFields: no document that decodes into a JobRegisterRequest
// makes CheckFields panic.
func FuzzCheckFields(f *testing.F) {
	f.Add(`{"Job":{"ID":"a","Periodic":{"Spec":"@daily"},"TaskGroups":[{"Tasks":[{"Resources":{"Networks":[1]}}]}]}}`)
	f.Add(`{"Job":{"TaskGroups":[{"Meta":{"a":"b"},"Wat":[[[]]]}]},"X":{"y":[0,0.0,-0,1e-9]}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var req JobRegisterRequest
		if json.Unmarshal([]byte(body), &req) != nil {
			return
		}
		_, _ = CheckFields([]byte(body), &req, "")
	})
}

// TestJobsParseRequestVariables: Variables decodes from GPUlayer's object
// and from Nomad's variable-file string; anything else is an error.
func TestJobsParseRequestVariables(t *testing.T) {
	var p JobsParseRequest
	if err := json.Unmarshal([]byte(`{"JobHCL":"x","Variables":{"a":"1"},"Canonicalize":true}`), &p); err != nil || p.Variables["a"] != "1" || !p.Canonicalize {
		t.Errorf("object: %+v %v", p, err)
	}
	p = JobsParseRequest{}
	if err := json.Unmarshal([]byte(`{"JobHCL":"x","Variables":"a = 1\n"}`), &p); err != nil || p.VariablesHCL != "a = 1\n" || p.Variables != nil {
		t.Errorf("string: %+v %v", p, err)
	}
	if err := json.Unmarshal([]byte(`{"JobHCL":"x","Variables":[1]}`), &p); err == nil || !strings.Contains(err.Error(), "Variables") {
		t.Errorf("list: %v", err)
	}
}

// TestCheckFieldsWarningsBounded: a body with 100,000 unknown fields, or
// one unknown key of 100 KB, gets at most MaxFieldWarnings warnings of
// bounded length and a count of the rest (the answer to a 930 KB plan was
// 9.3 MB of warnings).
func TestCheckFieldsWarningsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"Job":{"ID":"a","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Resources":{"Devices":[{"Name":"nvidia/gpu","Constraints":[{`)
	const n = 100_000
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"x%d":1`, i)
	}
	fmt.Fprintf(&b, `,%q:1}]}]}}]}]}}`, strings.Repeat("k", 100_000))
	body := []byte(b.String())
	var req JobRegisterRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	warnings, err := CheckFields(body, &req, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != MaxFieldWarnings+1 {
		t.Fatalf("%d warnings, want %d and a count", len(warnings), MaxFieldWarnings+1)
	}
	if want := fmt.Sprintf("... and %d more fields ignored", n+1-MaxFieldWarnings); warnings[MaxFieldWarnings] != want {
		t.Fatalf("last warning %q, want %q", warnings[MaxFieldWarnings], want)
	}
	total := 0
	for _, w := range warnings {
		total += len(w)
	}
	if total > 200*len(warnings) {
		t.Fatalf("warnings hold %d bytes", total)
	}
	// The long key sorts first (sortedKeys): it is quoted clipped.
	if !strings.Contains(warnings[0], "kkk...: unknown field") || len(warnings[0]) > 200 {
		t.Fatalf("long key warned as %d bytes: %.100q", len(warnings[0]), warnings[0])
	}
}
