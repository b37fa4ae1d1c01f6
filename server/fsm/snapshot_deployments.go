package fsm

import "github.com/gpulayer/gpulayer/state"

// writeDeploymentState writes the job versions (and deployments) tables
// as records.
func writeDeploymentState(sw *snapshotWriter, snap *state.StateSnapshot) error {
	versions, err := snap.AllJobVersions(nil)
	if err != nil {
		return err
	}
	for _, j := range versions {
		if err := sw.record(SnapshotRecordJobVersion, j); err != nil {
			return err
		}
	}
	deployments, err := snap.Deployments(nil)
	if err != nil {
		return err
	}
	for _, d := range deployments {
		if err := sw.record(SnapshotRecordDeployment, d); err != nil {
			return err
		}
	}
	return nil
}
