package http

import (
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestUIAllocInputsAndOutputs: the allocation page lists the tasks'
// inputs and the recorded outputs with download links to the blob
// route, and the log archive; output paths render as text.
func TestUIAllocInputsAndOutputs(t *testing.T) {
	fs, _, ts := fixture(t)
	in := strings.Repeat("a", 64)
	out := strings.Repeat("b", 64)
	logs := strings.Repeat("c", 64)
	job := &structs.Job{ID: "train", Name: "train", Type: "batch", TaskGroups: []*structs.TaskGroup{{Name: "g", Tasks: []*structs.Task{{Name: "main", Driver: "native",
		Artifacts: []*structs.TaskArtifact{
			{GetterSource: "artifact://sha256/" + in, RelativeDest: "local/data", GetterMode: "dir"},
			{GetterSource: "https://example.com/w.bin", RelativeDest: "local/w.bin", Checksum: "sha256:" + in},
		}}}}}}
	fs.jobs["train"] = job
	fs.allocs["beefcafe-0001"] = &structs.Allocation{ID: "beefcafe-0001", JobID: "train", Job: job, TaskGroup: "g", NodeID: "node-1", ClientStatus: "complete",
		Outputs:    []*structs.ArtifactRef{{Path: "main/<b>metrics</b>.json", Digest: out, Size: 12}},
		LogArchive: logs}
	body := getPage(t, ts.URL+"/ui/allocation/beefcafe-0001")
	for _, want := range []string{
		"Inputs and outputs",
		`href="/v1/artifact/sha256/` + in + `"`,
		"https://example.com/w.bin",
		"local/data",
		`href="/v1/artifact/sha256/` + out + `"`,
		"main/&lt;b&gt;metrics&lt;/b&gt;.json",
		"12 B",
		`href="/v1/artifact/sha256/` + logs + `"`,
		"alloc-beefcafe-logs.tar",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>metrics</b>") {
		t.Error("an output path rendered as markup")
	}
}
