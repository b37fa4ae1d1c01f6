package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// actorClient is a fake client that runs exec by echoing stdin back and
// records signals and restarts.
type actorClient struct {
	*fakeClient
	signals  []string
	restarts []string
}

func (c *actorClient) AllocSignal(ctx context.Context, allocID, task, signal string) error {
	if signal == "NOPE" {
		return fmt.Errorf("%w: unknown signal %q", structs.ErrInvalid, signal)
	}
	c.signals = append(c.signals, allocID+"/"+task+"/"+signal)
	return nil
}

func (c *actorClient) AllocRestart(ctx context.Context, allocID, task string) error {
	c.restarts = append(c.restarts, allocID+"/"+task)
	return nil
}

func (c *actorClient) AllocExec(ctx context.Context, allocID, task string, cmd []string, tty bool, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if cmd[0] == "missing" {
		return -1, errors.New("command \"missing\" not found")
	}
	in, _ := io.ReadAll(stdin)
	fmt.Fprintf(stdout, "%s %v tty=%v in=%s", allocID, cmd, tty, in)
	fmt.Fprint(stderr, "warning")
	return 7, nil
}

// TestAllocActionsProxiedToTheAllocsNode sends signal, restart and exec to
// an agent whose node does not run the allocation: it proxies them to the
// agent of the allocation's node, exec's full-duplex stream included.
func TestAllocActionsProxiedToTheAllocsNode(t *testing.T) {
	fs, fc, front := fixture(t)
	// The allocation runs on node-2, served by a second agent.
	fs.allocs["a1b2c3d4-0000"].NodeID = "node-2"
	node2 := &structs.Node{ID: "node-2", Name: "box"}
	ac := &actorClient{fakeClient: &fakeClient{node: node2, logs: fc.logs}}
	h2, err := New(Config{Server: fs, Client: ac})
	if err != nil {
		t.Fatal(err)
	}
	back := httptest.NewServer(h2)
	t.Cleanup(back.Close)
	node2.HTTPAddr = strings.TrimPrefix(back.URL, "http://")
	fs.nodes["node-2"] = node2

	c, err := api.NewClient(&api.Config{Address: front.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.AllocSignal(ctx, "a1b2c3d4-0000", "main", "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	if err := c.AllocRestart(ctx, "a1b2c3d4-0000", ""); err != nil {
		t.Fatal(err)
	}
	if len(ac.signals) != 1 || ac.signals[0] != "a1b2c3d4-0000/main/SIGHUP" || len(ac.restarts) != 1 {
		t.Fatalf("signals %v restarts %v", ac.signals, ac.restarts)
	}
	var se *api.StatusError
	if err := c.AllocSignal(ctx, "a1b2c3d4-0000", "", "NOPE"); !errors.As(err, &se) || se.Code != 400 || !strings.Contains(se.Message, "NOPE") {
		t.Fatalf("bad signal: %v", err)
	}
	if err := c.AllocSignal(ctx, "a1b2c3d4-0000", "", ""); !errors.As(err, &se) || se.Code != 400 {
		t.Fatalf("empty signal: %v", err)
	}

	var out, errOut bytes.Buffer
	code, err := c.AllocExec(ctx, "a1b2c3d4-0000", "", []string{"cat", "-"}, true, strings.NewReader("hello stdin"), &out, &errOut)
	if err != nil || code != 7 {
		t.Fatalf("exec: code %d err %v", code, err)
	}
	if out.String() != "a1b2c3d4-0000 [cat -] tty=true in=hello stdin" || errOut.String() != "warning" {
		t.Fatalf("exec stdout %q stderr %q", out.String(), errOut.String())
	}
	if _, err := c.AllocExec(ctx, "a1b2c3d4-0000", "", []string{"missing"}, false, nil, &out, &errOut); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("exec of a missing command: %v", err)
	}
	if _, err := c.AllocExec(ctx, "a1b2c3d4-0000", "", nil, false, nil, &out, &errOut); !errors.As(err, &se) || se.Code != 400 {
		t.Fatalf("exec without a command: %v", err)
	}
	if err := c.AllocSignal(ctx, "nope", "", "HUP"); !errors.As(err, &se) || se.Code != 404 {
		t.Fatalf("signal unknown allocation: %v", err)
	}
}
