package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/structs"
)

// checkOutputLimit bounds what a check keeps of a response body or a
// script's output, in bytes.
const checkOutputLimit = 4096

// checkResult is one run of a check.
type checkResult struct {
	ok     bool
	code   int
	output string
}

// limitedBuffer keeps the first n bytes written and drops the rest.
type limitedBuffer struct {
	buf bytes.Buffer
	n   int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.n - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
		} else {
			b.buf.Write(p)
		}
	}
	return len(p), nil
}

// checkHTTPClient runs http checks: no redirects followed past the
// instance, no keep-alive between runs, no proxy.
var checkHTTPClient = &http.Client{
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// runHTTPCheck GETs http://addr<path>; a 2xx answer passes, as in Nomad.
func runHTTPCheck(ctx context.Context, addr, path string) checkResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return checkResult{output: err.Error()}
	}
	req.Header.Set("User-Agent", "gpulayer-check")
	resp, err := checkHTTPClient.Do(req)
	if err != nil {
		return checkResult{output: err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, checkOutputLimit))
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	return checkResult{ok: ok, code: resp.StatusCode, output: fmt.Sprintf("HTTP GET %s: %s %s", path, resp.Status, body)}
}

// runTCPCheck passes when a TCP connection to addr opens.
func runTCPCheck(ctx context.Context, addr string) checkResult {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return checkResult{output: err.Error()}
	}
	conn.Close()
	return checkResult{ok: true, output: "TCP connect " + addr + ": Success"}
}

// runScriptCheck runs the command inside the task (the driver's exec path:
// the task's user, directory and environment, or its container) and
// passes on exit 0. The context carries the check's timeout; output is
// bounded.
func runScriptCheck(ctx context.Context, ex driver.Execer, taskID string, c *structs.ServiceCheck) checkResult {
	out := &limitedBuffer{n: checkOutputLimit}
	cmd := append([]string{c.Command}, c.Args...)
	code, err := ex.ExecTask(ctx, taskID, &driver.ExecOptions{Cmd: cmd, Stdin: bytes.NewReader(nil), Stdout: out, Stderr: out})
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return checkResult{code: code, output: fmt.Sprintf("timed out after %s: %s", c.Timeout, out.buf.String())}
	case err != nil:
		return checkResult{code: code, output: err.Error()}
	}
	return checkResult{ok: code == 0, code: code, output: "exit " + strconv.Itoa(code) + ": " + out.buf.String()}
}

// checkTimeout is the check's Timeout, or structs.MinCheckTimeout for a
// check stored without one.
func checkTimeout(c *structs.ServiceCheck) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return structs.MinCheckTimeout
}
