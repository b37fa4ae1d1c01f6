package fsm

import (
	"github.com/gpulayer/gpulayer/structs"
)

func init() {
	register(structs.ArtifactUpsertRequestType, (*FSM).applyArtifactUpsert)
	register(structs.ArtifactDeleteRequestType, (*FSM).applyArtifactDelete)
}

// applyArtifactUpsert commits artifact metadata; the blob bytes are
// already in the uploading server's store (never in the log).
func (f *FSM) applyArtifactUpsert(index uint64, req *structs.ArtifactUpsertRequest) interface{} {
	if err := f.State().UpsertArtifacts(index, req.Artifacts); err != nil {
		return errResp(err)
	}
	if f.onArtifactsUpserted != nil {
		f.onArtifactsUpserted()
	}
	return nil
}

// applyArtifactDelete removes the metadata of collected artifacts and
// tells Config.OnArtifactsDeleted which went, so the server removes their
// blobs from disk outside the apply.
func (f *FSM) applyArtifactDelete(index uint64, req *structs.ArtifactDeleteRequest) interface{} {
	removed, err := f.State().DeleteArtifacts(index, req.Artifacts)
	if err != nil {
		return errResp(err)
	}
	if len(removed) > 0 && f.onArtifactsDeleted != nil {
		f.onArtifactsDeleted(removed)
	}
	return nil
}
