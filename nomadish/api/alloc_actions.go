package api

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// AllocStopResponse answers POST /v1/allocation/{id}/stop.
type AllocStopResponse struct {
	EvalID string
	Index  uint64
}

// AllocSignalRequest is the body of POST /v1/allocation/{id}/signal. An
// empty Task signals every running task of the allocation.
type AllocSignalRequest struct {
	Task   string
	Signal string
}

// AllocRestartRequest is the body of POST /v1/allocation/{id}/restart. An
// empty Task restarts every running task.
type AllocRestartRequest struct {
	Task string
	// TaskName and AllTasks are the fields of Nomad's
	// AllocationRestartRequest: TaskName is Task; AllTasks restarts every
	// task (as an empty Task does).
	TaskName string `json:",omitempty"`
	AllTasks bool   `json:",omitempty"`
}

// NodeDrainRequest is the body of POST /v1/node/{id}/drain.
type NodeDrainRequest struct {
	// Enable starts the drain; false stops it.
	Enable bool
	// Deadline bounds the drain; 0 means none, negative means force now.
	Deadline time.Duration
	// KeepIneligible keeps the node ineligible when stopping a drain.
	KeepIneligible bool
}

// NodeEligibilityRequest is the body of POST /v1/node/{id}/eligibility:
// "eligible" or "ineligible".
type NodeEligibilityRequest struct {
	Eligibility string
}

// NodeWriteResponse answers the node drain and eligibility routes.
type NodeWriteResponse struct {
	Index uint64
}

// Actions on allocations and nodes.

// AllocStop stops an allocation; its job's evaluation replaces it.
func (c *Client) AllocStop(ctx context.Context, allocID string) (*AllocStopResponse, error) {
	var out AllocStopResponse
	_, err := c.write(http.MethodPost, "/v1/allocation/"+url.PathEscape(allocID)+"/stop", nil, struct{}{}, &out, &WriteOptions{Context: ctx})
	return &out, err
}

// AllocSignal sends a signal to a task (all tasks when task is empty).
func (c *Client) AllocSignal(ctx context.Context, allocID, task, signal string) error {
	_, err := c.write(http.MethodPost, "/v1/allocation/"+url.PathEscape(allocID)+"/signal", nil, &AllocSignalRequest{Task: task, Signal: signal}, nil, &WriteOptions{Context: ctx})
	return err
}

// AllocRestart restarts a task in place (all tasks when task is empty).
func (c *Client) AllocRestart(ctx context.Context, allocID, task string) error {
	_, err := c.write(http.MethodPost, "/v1/allocation/"+url.PathEscape(allocID)+"/restart", nil, &AllocRestartRequest{Task: task}, nil, &WriteOptions{Context: ctx})
	return err
}

// NodeDrain starts or stops a node's drain.
func (c *Client) NodeDrain(ctx context.Context, nodeID string, req *NodeDrainRequest) (*NodeWriteResponse, error) {
	var out NodeWriteResponse
	_, err := c.write(http.MethodPost, "/v1/node/"+url.PathEscape(nodeID)+"/drain", nil, req, &out, &WriteOptions{Context: ctx})
	return &out, err
}

// NodeEligibility marks a node eligible or ineligible for placements.
func (c *Client) NodeEligibility(ctx context.Context, nodeID string, eligible bool) (*NodeWriteResponse, error) {
	e := "ineligible"
	if eligible {
		e = "eligible"
	}
	var out NodeWriteResponse
	_, err := c.write(http.MethodPost, "/v1/node/"+url.PathEscape(nodeID)+"/eligibility", nil, &NodeEligibilityRequest{Eligibility: e}, &out, &WriteOptions{Context: ctx})
	return &out, err
}

// Exec frame types. POST /v1/allocation/{id}/exec?task=&tty=&command=<JSON
// list> streams frames both ways over one full-duplex HTTP/1.1 exchange:
// the request body carries stdin, the response body the command's output
// and, last, its exit code or an error. A frame is one type byte, a 4-byte
// big-endian payload length, and the payload.
const (
	ExecFrameStdin    byte = 'i' // request: stdin bytes
	ExecFrameStdinEOF byte = 'I' // request: stdin closed
	ExecFrameStdout   byte = 'o'
	ExecFrameStderr   byte = 'e'
	ExecFrameExit     byte = 'x' // payload: the exit code in decimal
	ExecFrameError    byte = 'E' // payload: why the command could not run
)

// MaxExecFrame is the largest exec frame payload accepted, in bytes.
const MaxExecFrame = 1 << 20

// WriteExecFrame writes one exec frame.
func WriteExecFrame(w io.Writer, typ byte, payload []byte) error {
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ReadExecFrame reads one exec frame. It returns io.EOF at a clean end of
// the stream and an error for a truncated frame or one larger than
// MaxExecFrame.
func ReadExecFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("exec stream: truncated frame header")
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxExecFrame {
		return 0, nil, fmt.Errorf("exec stream: frame of %d bytes exceeds %d", n, MaxExecFrame)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, fmt.Errorf("exec stream: truncated frame: %w", err)
	}
	return hdr[0], p, nil
}

// AllocExec runs cmd inside a running task (task may be empty when the
// allocation runs one) and returns its exit code. stdin, when not nil, is
// sent to the command; with tty the command gets a terminal and its
// output arrives on stdout only.
func (c *Client) AllocExec(ctx context.Context, allocID, task string, cmd []string, tty bool, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmdJSON, err := json.Marshal(cmd)
	if err != nil {
		return -1, err
	}
	params := url.Values{}
	params.Set("task", task)
	params.Set("tty", strconv.FormatBool(tty))
	params.Set("command", string(cmdJSON))
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriter(pw)
		if stdin != nil {
			buf := make([]byte, 32<<10)
			for {
				n, err := stdin.Read(buf)
				if n > 0 {
					if WriteExecFrame(bw, ExecFrameStdin, buf[:n]) != nil || bw.Flush() != nil {
						return
					}
				}
				if err != nil {
					break
				}
			}
		}
		_ = WriteExecFrame(bw, ExecFrameStdinEOF, nil)
		_ = bw.Flush()
		_ = pw.Close()
	}()
	req, err := c.newRequest(ctx, http.MethodPost, "/v1/allocation/"+url.PathEscape(allocID)+"/exec", params, nil)
	if err != nil {
		return -1, err
	}
	req.Body = pr
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.do(req)
	if err != nil {
		pr.Close()
		return -1, err
	}
	defer resp.Body.Close()
	defer pr.Close()
	for {
		typ, p, err := ReadExecFrame(resp.Body)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return -1, fmt.Errorf("exec stream ended without an exit code")
			}
			return -1, err
		}
		switch typ {
		case ExecFrameStdout:
			if stdout != nil {
				_, _ = stdout.Write(p)
			}
		case ExecFrameStderr:
			if stderr != nil {
				_, _ = stderr.Write(p)
			}
		case ExecFrameExit:
			code, err := strconv.Atoi(string(p))
			if err != nil {
				return -1, fmt.Errorf("exec stream: bad exit code %q", p)
			}
			return code, nil
		case ExecFrameError:
			return -1, errors.New(string(p))
		}
	}
}
