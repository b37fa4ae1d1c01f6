package artifacts

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// HeaderReplica marks a server-to-server artifact request: the answering
// server serves its own copy only (404 when it lacks it) and pulls from
// no one.
const HeaderReplica = "X-Gpulayer-Replica"

// Fetch GETs the blob of digest (size bytes) from the server whose API is
// at base ("https://host:port") with client and hdr (credentials, or none
// when client presents a server certificate) and stores it, verified (Put).
// A blob already stored is not fetched again. It returns the peer's
// status as an error when it is not 200, and Put's errors.
func (s *Store) Fetch(ctx context.Context, client *http.Client, base, digest string, size int64, hdr http.Header) error {
	if err := check(digest); err != nil {
		return err
	}
	if ok, _, err := s.Has(digest); err != nil || ok {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/artifact/sha256/"+digest, nil)
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set(HeaderReplica, "1")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	if cl := resp.Header.Get("Content-Length"); cl != "" && cl != strconv.FormatInt(size, 10) {
		return fmt.Errorf("peer sends %s bytes, the artifact has %d", cl, size)
	}
	_, _, err = s.Put(digest, resp.Body, size)
	return err
}
