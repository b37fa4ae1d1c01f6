package api

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// Log types accepted by AllocFS.Logs.
const (
	LogTypeStdout = "stdout"
	LogTypeStderr = "stderr"
)

// AllocFS is the client for the /v1/client/fs routes.
type AllocFS struct{ c *Client }

// AllocFS returns the allocation file system endpoints.
func (c *Client) AllocFS() *AllocFS { return &AllocFS{c: c} }

// Logs streams a task's log ("stdout" or "stderr") as raw bytes. With
// follow, the stream stays open and carries new output until the task
// finishes or ctx is canceled. The caller closes the reader.
func (a *AllocFS) Logs(ctx context.Context, allocID, task, logType string, follow bool) (io.ReadCloser, error) {
	params := url.Values{}
	params.Set("task", task)
	params.Set("type", logType)
	params.Set("follow", strconv.FormatBool(follow))
	params.Set("plain", "true")
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
