package agent

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// TestParseConfigRefusesDeepNesting: an agent config nested past
// jobspec.MaxNestingDepth is refused with an error naming file:line:col
// instead of recursing in hcl/v2 until the stack overflows.
func TestParseConfigRefusesDeepNesting(t *testing.T) {
	src := "client {\n  meta = " + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + "\n}\n"
	_, err := ParseConfig("agent.hcl", []byte(src))
	if !errors.Is(err, ErrConfig) || !regexp.MustCompile(`agent\.hcl:2:\d+: Nesting too deep`).MatchString(err.Error()) {
		t.Fatalf("err = %v, want ErrConfig naming agent.hcl:2:col and the nesting limit", err)
	}
}

var configDiagLine = regexp.MustCompile(`fuzz\.hcl:\d+:\d+: `)

// FuzzParseAgentConfig checks that ParseConfig never panics on any agent
// config and that every refusal wraps ErrConfig and names a position.
func FuzzParseAgentConfig(f *testing.F) {
	for _, s := range []string{
		"",
		"bind_addr = \"10.0.0.5\"\naddresses {\n  http = \"0.0.0.0\"\n}\n",
		"server {\n  enabled = true\n  bootstrap_expect = 3\n}\nclient {\n  enabled = true\n  meta = { rack = \"r1\" }\n}\n",
		"data_dir = \"/tmp/x\"\nports {\n  http = 4656\n}\n",
		"client { meta = [[[[]]]] }",
		"limits {\n  http_max_conns_per_client = 100\n  https_handshake_timeout = \"5s\"\n}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		_, err := ParseConfig("fuzz.hcl", src)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrConfig) {
			t.Fatalf("error does not wrap ErrConfig: %v", err)
		}
		if !configDiagLine.MatchString(err.Error()) {
			t.Fatalf("error names no file:line:col: %v", err)
		}
	})
}

// TestParseConfigRefusesEvalBlowup: nested for-expressions over literal
// lists (no function needed) are charged to jobspec's evaluation budget.
func TestParseConfigRefusesEvalBlowup(t *testing.T) {
	list := "[" + strings.TrimSuffix(strings.Repeat("1,", 1000), ",") + "]"
	src := "client {\n  meta = { a = jsonencode([for x in " + list + " : [for y in " + list + " : [for z in " + list + " : 1]]]) }\n}\n"
	src = strings.Replace(src, "jsonencode(", "(", 1)
	_, err := ParseConfig("agent.hcl", []byte(src))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "build more than") {
		t.Fatalf("err = %.300v, want the evaluation budget", err)
	}
}
