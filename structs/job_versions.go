package structs

// JobTrackedVersions is how many versions of a job the state store keeps
// (Nomad's default, 6). When a job has more, the oldest go first, except
// that the newest stable version is kept even when it is older than the
// others, so auto_revert always has a version to go back to.
const JobTrackedVersions = 6

// JobStabilityRequest (Raft JobStabilityRequestType) sets Stable on one
// stored version of a job: the deployment watcher marks a version stable
// when its deployment succeeds, and a user may with PUT /v1/job/:id/stable.
type JobStabilityRequest struct {
	JobID      string
	JobVersion uint64
	Stable     bool
}

// JobRevertRequest asks to register an older version of a job again (PUT
// /v1/job/:id/revert). JobVersion is the version to go back to; when
// EnforcePriorVersion is set, the revert happens only while the job's
// current version is that number (a guard against a concurrent change).
type JobRevertRequest struct {
	JobID               string
	JobVersion          uint64
	EnforcePriorVersion *uint64
}

// Field diff types, as Nomad names them.
const (
	DiffTypeNone    = "None"
	DiffTypeAdded   = "Added"
	DiffTypeDeleted = "Deleted"
	DiffTypeEdited  = "Edited"
)

// FieldDiff is one leaf value that differs between two job versions. Name
// is its path as JobDiff names it (`TaskGroups["web"].Count`); Old and New
// are JSON values, empty on the side where the value is absent.
type FieldDiff struct {
	Type     string
	Name     string
	Old, New string
}

// VersionDiff is what changed from one job version to the next: Type is
// DiffTypeNone when nothing did, else DiffTypeEdited, and Fields lists the
// changed leaves sorted by path. Fields the server sets (status, version,
// stability, indexes, submit time) are left out, as in JobDiff.
type VersionDiff struct {
	Type   string
	ID     string
	Fields []*FieldDiff
}

// JobVersionDiff compares old with cur (the next version).
func JobVersionDiff(old, cur *Job) *VersionDiff {
	d := &VersionDiff{Type: DiffTypeNone}
	if cur != nil {
		d.ID = cur.ID
	}
	a, b := flattenJob(old), flattenJob(cur)
	for _, k := range unionKeys(a, b) {
		va, ina := a[k]
		vb, inb := b[k]
		switch {
		case ina && !inb:
			d.Fields = append(d.Fields, &FieldDiff{Type: DiffTypeDeleted, Name: k, Old: va})
		case !ina && inb:
			d.Fields = append(d.Fields, &FieldDiff{Type: DiffTypeAdded, Name: k, New: vb})
		case va != vb:
			d.Fields = append(d.Fields, &FieldDiff{Type: DiffTypeEdited, Name: k, Old: va, New: vb})
		}
	}
	if len(d.Fields) > 0 {
		d.Type = DiffTypeEdited
	}
	return d
}
