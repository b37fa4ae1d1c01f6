package structs

import (
	"strings"
	"testing"
)

func TestJobArtifactDigests(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	j := &Job{TaskGroups: []*TaskGroup{{Tasks: []*Task{
		{Artifacts: []*TaskArtifact{{GetterSource: "artifact://sha256/" + b}, {GetterSource: "https://x/y", Checksum: "sha256:" + a}}},
		{Artifacts: []*TaskArtifact{{GetterSource: "artifact://sha256/" + a}, {GetterSource: "artifact://sha256/" + b}}},
	}}}}
	got := j.ArtifactDigests()
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("got %v", got)
	}
}

func TestCheckAllocArtifacts(t *testing.T) {
	d := strings.Repeat("0", 64)
	for _, bad := range []*Allocation{
		{Outputs: []*ArtifactRef{{Path: "../x", Digest: d}}},
		{Outputs: []*ArtifactRef{{Path: "/x", Digest: d}}},
		{Outputs: []*ArtifactRef{{Path: "a//b", Digest: d}}},
		{Outputs: []*ArtifactRef{{Path: "a", Digest: "XYZ"}}},
		{Outputs: []*ArtifactRef{{Path: "a", Digest: d, Size: -1}}},
		{Outputs: []*ArtifactRef{nil}},
		{LogArchive: "nothex"},
	} {
		if err := CheckAllocArtifacts(bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
	if err := CheckAllocArtifacts(&Allocation{Outputs: []*ArtifactRef{{Path: "main/a.txt", Digest: d, Size: 3}}, LogArchive: d}); err != nil {
		t.Fatal(err)
	}
}
