package structs

import (
	"errors"
	"strings"
	"testing"
)

// aliasNameOracle is the alias name rule written without a regular
// expression: 1-63 bytes of [a-z0-9.-], first and last a letter or digit.
func aliasNameOracle(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		if !alnum(s[i]) && s[i] != '.' && s[i] != '-' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}

func TestValidateEndpointAliasName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
		want string
	}{
		{"llm.primary", true, ""},
		{"a", true, ""},
		{"llm-70b", true, ""},
		{strings.Repeat("a", 63), true, ""},
		{"", false, "must not be empty"},
		{strings.Repeat("a", 64), false, "at most 63 bytes, got 64"},
		{"LLM", false, "only lowercase"},
		{".llm", false, "starting and ending"},
		{"llm-", false, "starting and ending"},
		{"llm primary", false, "only lowercase"},
		{"llm/primary", false, "only lowercase"},
		{"llm\n", false, "only lowercase"},
	} {
		err := ValidateEndpointAliasName("alias", tc.name)
		if (err == nil) != tc.ok || (err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "alias"))) {
			t.Errorf("%q: err = %v, want ok=%v containing %q", tc.name, err, tc.ok, tc.want)
		}
	}
}

// FuzzValidateEndpointAliasName: the validator agrees with the oracle on
// every input.
func FuzzValidateEndpointAliasName(f *testing.F) {
	for _, s := range []string{"llm.primary", "", "-", "a-", "a.b", strings.Repeat("z", 64), "A", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := ValidateEndpointAliasName("alias", s) == nil; got != aliasNameOracle(s) {
			t.Fatalf("%q: valid = %v, oracle says %v", s, got, !got)
		}
	})
}

// TestEndpointAliasValidateAndHelpers covers the stored alias's checks
// and the member helpers.
func TestEndpointAliasValidateAndHelpers(t *testing.T) {
	good := &EndpointAlias{Namespace: "default", Name: "llm.primary", Endpoint: "llm-70b", JobID: "j", PromotedBy: "anonymous", PromotedAt: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(a *EndpointAlias){
		"namespace": func(a *EndpointAlias) { a.Namespace = "" },
		"endpoint":  func(a *EndpointAlias) { a.Endpoint = "Bad" },
		"job":       func(a *EndpointAlias) { a.JobID = "" },
		"who":       func(a *EndpointAlias) { a.PromotedBy = "" },
		"when":      func(a *EndpointAlias) { a.PromotedAt = 0 },
	} {
		a := good.Copy()
		mut(a)
		if err := a.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if err := (*EndpointAlias)(nil).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil: %v", err)
	}
	job := &Job{TaskGroups: []*TaskGroup{{Name: "a"}, {Name: "b", Endpoint: &Endpoint{Name: "llm"}}}}
	if tg := FindEndpointGroup(job, "llm"); tg == nil || tg.Name != "b" {
		t.Fatalf("FindEndpointGroup = %v", tg)
	}
	if FindEndpointGroup(job, "x") != nil || FindEndpointGroup(nil, "llm") != nil {
		t.Fatal("FindEndpointGroup found what is not there")
	}
	allocs := []*Allocation{
		{ID: "1", TaskGroup: "b", DesiredStatus: AllocDesiredStatusRun, ClientStatus: AllocClientStatusRunning},
		{ID: "2", TaskGroup: "b", DesiredStatus: AllocDesiredStatusStop, ClientStatus: AllocClientStatusRunning},
		{ID: "3", TaskGroup: "b", DesiredStatus: AllocDesiredStatusRun, ClientStatus: AllocClientStatusFailed},
		{ID: "4", TaskGroup: "a", DesiredStatus: AllocDesiredStatusRun, ClientStatus: AllocClientStatusRunning},
		nil,
	}
	if m := LiveEndpointMembers(allocs, "b"); len(m) != 1 || m[0].ID != "1" {
		t.Fatalf("LiveEndpointMembers = %v", m)
	}
}
