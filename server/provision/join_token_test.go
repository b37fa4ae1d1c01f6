package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-hclog"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestJoinTokenStaysSecret: the join token reaches the provider's Create
// and nothing else: not the provision requests in Raft, not the pool
// status, not the log, even when the provider's error quotes it (an exec
// script echoing its stdin on stderr).
func TestJoinTokenStaysSecret(t *testing.T) {
	const token = "4f1c2b9e-join-token-secret-7d3a"
	h := newHarness(t, gpuPool("p", 1, 2))
	h.p.cfg.Join = func() JoinInfo {
		return JoinInfo{Servers: []string{"127.0.0.1:4646"}, Token: token, Region: "global", Datacenter: "dc1"}
	}
	var logs syncBuffer
	h.p.logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})
	fp := h.provs["p"]
	fp.mu.Lock()
	fp.fail = errors.New(`create: bad config {"join":{"token":"` + token + `"}}`)
	fp.mu.Unlock()
	ctx := context.Background()
	h.step(ctx) // top-up to min 1; the create fails quoting the token
	reqs := h.requests("p")
	if len(reqs) != 1 || reqs[0].Status != structs.ProvisionStatusFailed || !strings.Contains(reqs[0].Error, redactedToken) {
		t.Fatalf("after a failing create: %+v", reqs)
	}
	fp.mu.Lock()
	fp.fail = nil
	fp.mu.Unlock()
	h.advance(time.Minute)
	h.settle(ctx)
	if reqs := h.requests("p"); len(reqs) != 1 || reqs[0].Status != structs.ProvisionStatusComplete {
		t.Fatalf("after a good create: %+v", reqs)
	}
	fp.mu.Lock()
	joins := append([]JoinInfo(nil), fp.joins...)
	fp.mu.Unlock()
	if len(joins) < 2 || joins[0].Token != token || joins[len(joins)-1].Token != token {
		t.Fatalf("provider got joins %+v, want the token each time", joins)
	}
	st, err := BuildPoolStatus(h.fsm.State(), h.pools["p"])
	if err != nil {
		t.Fatal(err)
	}
	status, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	entries := append([][]byte(nil), h.entries...)
	h.mu.Unlock()
	for i, e := range entries {
		if bytes.Contains(e, []byte(token)) {
			t.Errorf("Raft entry %d holds the join token", i)
		}
	}
	if strings.Contains(string(status), token) {
		t.Errorf("pool status holds the join token: %s", status)
	}
	if l := logs.String(); strings.Contains(l, token) || !strings.Contains(l, redactedToken) {
		t.Errorf("log holds the token or no redacted provider error: %s", l)
	}
}
