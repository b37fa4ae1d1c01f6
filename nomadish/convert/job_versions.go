package convert

import (
	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// JobVersionsFromStructs renders a job's versions (newest first, each as
// JobRead renders a job in region) and, with diffs, the change from each
// version to the next newer one: Diffs[i] is from versions[i+1] to
// versions[i], as Nomad's /versions?diffs=true.
func JobVersionsFromStructs(versions []*structs.Job, diffs bool, region string) *api.JobVersionsResponse {
	out := &api.JobVersionsResponse{Versions: make([]*api.Job, 0, len(versions))}
	for _, v := range versions {
		out.Versions = append(out.Versions, JobRead(v, region))
	}
	if !diffs {
		return out
	}
	out.Diffs = make([]*api.JobDiff, 0, len(versions))
	for i := 0; i+1 < len(versions); i++ {
		out.Diffs = append(out.Diffs, JobDiffFromStructs(structs.JobVersionDiff(versions[i+1], versions[i])))
	}
	return out
}

// JobDiffFromStructs renders a version diff in Nomad's JobDiff shape.
func JobDiffFromStructs(d *structs.VersionDiff) *api.JobDiff {
	if d == nil {
		return nil
	}
	out := &api.JobDiff{Type: d.Type, ID: d.ID, Fields: make([]*api.FieldDiff, 0, len(d.Fields))}
	for _, f := range d.Fields {
		out.Fields = append(out.Fields, &api.FieldDiff{Type: f.Type, Name: f.Name, Old: f.Old, New: f.New})
	}
	return out
}
