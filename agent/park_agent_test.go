package agent_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent"
	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestAgentParkedQueriesKeepConnLimit: on a real agent, parked blocking
// queries on a node's allocations still count against
// http_max_conns_per_client (the Parker sits above the limit), and the
// slots of clients that hang up while parked come back within seconds,
// not at the end of their waits: a client agent that restarts or retries
// is not locked out of its server.
func TestAgentParkedQueriesKeepConnLimit(t *testing.T) {
	cfg := agent.DefaultConfig()
	cfg.Name = "srv1"
	cfg.Server.Enabled = true
	cfg.Limits = &agent.LimitsConfig{HTTPMaxConnsPerClient: 3}
	a := startAgent(t, cfg)
	base := "http://" + a.HTTPAddr()
	const id, secret = "4b3c2a10-0000-4000-8000-000000000001", "park-secret"
	if code, body := putJSON(t, base+"/v1/node/register", map[string]interface{}{
		"Node": map[string]interface{}{"ID": id, "Name": "parker", "Datacenter": "dc1"}, "SecretID": secret}, ""); code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/node/"+id+"/client-allocs", nil)
	req.Header.Set(structs.HeaderNodeSecret, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	index := resp.Header.Get("X-Gpulayer-Index")
	http.DefaultClient.CloseIdleConnections()
	park := func() net.Conn {
		c, err := net.Dial("tcp", a.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		fmt.Fprintf(c, "GET /v1/node/%s/client-allocs?index=%s&wait=5m HTTP/1.1\r\nHost: x\r\n%s: %s\r\n\r\n", id, index, structs.HeaderNodeSecret, secret)
		return c
	}
	// answered reports whether c gets an answer (or is closed) within d.
	answered := func(c net.Conn, d time.Duration) (int, bool) {
		_ = c.SetReadDeadline(time.Now().Add(d))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return 0, false
			}
			return 0, true
		}
		_, _ = io.ReadAll(resp.Body)
		return resp.StatusCode, true
	}
	var parked []net.Conn
	for i := 0; i < 3; i++ {
		c := park()
		if code, ok := answered(c, 300*time.Millisecond); ok {
			t.Fatalf("query %d answered at once (%d): not blocking", i, code)
		}
		parked = append(parked, c)
	}
	if code, ok := answered(park(), 10*time.Second); !ok || code != http.StatusTooManyRequests {
		t.Fatalf("a fourth connection with three parked: %d (answered %v), want 429", code, ok)
	}
	for _, c := range parked {
		_ = c.Close()
	}
	// The hung-up clients' slots come back: a new parked query blocks
	// instead of being refused.
	waittest.For(t, 20*time.Second, "a slot freed", func() (bool, string) {
		code, ok := answered(park(), 300*time.Millisecond)
		return !ok, fmt.Sprintf("answered %d", code)
	})
}
