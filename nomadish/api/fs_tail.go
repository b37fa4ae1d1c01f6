package api

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// LogsTail is Logs starting near the end of the log: at the start of its
// last lines lines when lines > 0, else at its last bytes bytes when bytes
// > 0 (origin=end&offset=bytes), counted across rotated files. With follow
// it then keeps streaming new output.
func (a *AllocFS) LogsTail(ctx context.Context, allocID, task, logType string, follow bool, lines int, bytes int64) (io.ReadCloser, error) {
	params := url.Values{}
	params.Set("task", task)
	params.Set("type", logType)
	params.Set("follow", strconv.FormatBool(follow))
	params.Set("plain", "true")
	if lines > 0 {
		params.Set("lines", strconv.Itoa(lines))
	} else if bytes > 0 {
		params.Set("origin", "end")
		params.Set("offset", strconv.FormatInt(bytes, 10))
	}
	req, err := a.c.newRequest(ctx, http.MethodGet, "/v1/client/fs/logs/"+url.PathEscape(allocID), params, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.c.do(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
