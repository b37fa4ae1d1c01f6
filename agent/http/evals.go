package http

import (
	"net/http"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

// evalsRead renders evaluations for a list: never null.
func evalsRead(evals []*structs.Evaluation) []*api.Evaluation {
	out := make([]*api.Evaluation, 0, len(evals))
	for _, e := range evals {
		if e != nil {
			out = append(out, convert.EvalRead(e))
		}
	}
	return out
}

// evalGet handles GET /v1/evaluation/{id} (blocking).
func (h *handler) evalGet(w http.ResponseWriter, r *http.Request) (interface{}, error) {
	q, err := parseQueryOptions(r)
	if err != nil {
		return nil, err
	}
	eval, meta, err := h.srv.EvalGet(r.Context(), r.PathValue("id"), q)
	if err != nil {
		setMetaOnError(w, meta)
		return nil, err
	}
	setMeta(w, meta)
	return convert.EvalRead(eval), nil
}
