package fsm

import "github.com/gpulayer/gpulayer/state"

// writeNodePools writes the written node pools (not the unwritten
// built-ins) as records.
func writeNodePools(sw *snapshotWriter, snap *state.StateSnapshot) error {
	pools, err := snap.NodePoolRows(nil)
	if err != nil {
		return err
	}
	for _, p := range pools {
		if err := sw.record(SnapshotRecordNodePool, p); err != nil {
			return err
		}
	}
	return nil
}
