package command

import (
	"strings"
	"testing"
)

// TestNodeStatusShowsDrain: a node being drained says so in the node list
// and in the one-node view, as Nomad's `node status` does; before, both
// showed only "ready" and "ineligible", so a drain in progress could not
// be told from `node eligibility -disable`.
func TestNodeStatusShowsDrain(t *testing.T) {
	f := newFakeAPI()
	for _, n := range f.nodes {
		n.Drain = true
		n.SchedulingEligibility = "ineligible"
	}
	ts := f.serve(t)

	list := runCmd(t, ts.URL, "node", "status")
	if list.code != 0 {
		t.Fatalf("node status: exit %d: %s", list.code, list.err)
	}
	lines := strings.Split(strings.TrimSpace(list.out), "\n")
	if len(lines) != 2 {
		t.Fatalf("node status: want a header and one row, got:\n%s", list.out)
	}
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	col := -1
	for i, h := range header {
		if h == "Drain" {
			col = i
		}
	}
	if col < 0 || col >= len(row) || row[col] != "true" {
		t.Errorf("node status: want a Drain column reading true, got:\n%s", list.out)
	}

	one := runCmd(t, ts.URL, "node", "status", "ef56")
	if one.code != 0 {
		t.Fatalf("node status ef56: exit %d: %s", one.code, one.err)
	}
	if !strings.Contains(one.out, "\nDrain              = true\n") {
		t.Errorf("node status ef56: want a line Drain = true, got:\n%s", one.out)
	}
}
