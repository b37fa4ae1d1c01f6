package fsm

import "github.com/gpulayer/gpulayer/state"

// writeEndpointAliases writes the endpoint aliases table as records.
func writeEndpointAliases(sw *snapshotWriter, snap *state.StateSnapshot) error {
	aliases, err := snap.EndpointAliases(nil)
	if err != nil {
		return err
	}
	for _, a := range aliases {
		if err := sw.record(SnapshotRecordEndpointAlias, a); err != nil {
			return err
		}
	}
	return nil
}
