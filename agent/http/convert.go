package http

import (
	"encoding/json"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// jobToStructs converts a wire job to the domain type. The wire types mirror
// structs field for field, so a JSON round trip is exact.
// TODO(lead): switch to convert.JobToStructs once nomadish/convert lands.
func jobToStructs(j *api.Job) (*structs.Job, error) {
	raw, err := json.Marshal(j)
	if err != nil {
		return nil, badRequest("encode job: %v", err)
	}
	var out structs.Job
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, badRequest("convert job: %v", err)
	}
	return &out, nil
}
