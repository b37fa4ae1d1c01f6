package fsm

import "github.com/gpulayer/gpulayer/state"

// writeProvisionState writes the provision requests table as records.
func writeProvisionState(sw *snapshotWriter, snap *state.StateSnapshot) error {
	reqs, err := snap.ProvisionRequests(nil)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if err := sw.record(SnapshotRecordProvisionRequest, r); err != nil {
			return err
		}
	}
	return nil
}
