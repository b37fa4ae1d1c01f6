package client

import (
	"testing"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// finishAlloc records the final status and forgets the allocation's task
// handles and start in one transaction, leaving other allocations' alone.
func TestStateFinishAlloc(t *testing.T) {
	st, err := openState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	for _, id := range []string{"a1", "a2"} {
		if err := st.putHandle(id, "main", &driver.TaskHandle{PID: 42}); err != nil {
			t.Fatal(err)
		}
		if err := st.putAllocStart(id, 7); err != nil {
			t.Fatal(err)
		}
	}
	rec := &allocRecord{ClientStatus: structs.AllocClientStatusComplete, ClientDescription: "All tasks have completed"}
	if err := st.finishAlloc("a1", rec); err != nil {
		t.Fatal(err)
	}
	term, err := st.terminal()
	if err != nil {
		t.Fatal(err)
	}
	if got := term["a1"]; got == nil || got.ClientStatus != structs.AllocClientStatusComplete || term["a2"] != nil {
		t.Fatalf("terminal records: %+v", term)
	}
	hs, err := st.handles()
	if err != nil {
		t.Fatal(err)
	}
	if hs["a1"] != nil || hs["a2"]["main"] == nil || hs["a2"]["main"].PID != 42 {
		t.Fatalf("handles after finish: %+v", hs)
	}
	starts, err := st.allocStarts()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := starts["a1"]; ok || starts["a2"] != 7 {
		t.Fatalf("starts after finish: %v", starts)
	}
}
