package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// OutputReader streams the blob of one recorded output (an entry of
// Allocation.Outputs, or its LogArchive) by its lower-case hex SHA-256:
// GET /v1/artifact/sha256/{digest}. The caller closes the body and should
// verify the digest of what it reads (the server verifies too; a
// mismatch cuts the stream short). An unknown digest is a *StatusError
// with Code 404.
func (a *Allocations) OutputReader(ctx context.Context, digest string) (io.ReadCloser, error) {
	if len(digest) != 64 {
		return nil, fmt.Errorf("output digest %q: want 64 hex digits", digest)
	}
	for _, c := range digest {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, fmt.Errorf("output digest %q: want lower-case hex digits", digest)
		}
	}
	req, err := a.c.newRequest(ctx, http.MethodGet, "/v1/artifact/sha256/"+digest, nil, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.c.do(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
