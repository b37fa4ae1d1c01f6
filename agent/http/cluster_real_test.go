package http

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/server/servertest"
)

// routedServer is a real server whose leader HTTP address comes from the
// test's table of httptest servers (servertest clusters run without
// gossip, which normally carries it).
type routedServer struct {
	*server.Server
	mu   *sync.Mutex
	urls map[string]string // Raft address → HTTP host:port
}

func (r routedServer) LeaderHTTPAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.urls[r.Leader()]
}

// realJobBody is a job the real server validates.
const realJobBody = `{"Job":{"ID":"%s","Name":"%s","Type":"service","TaskGroups":[{"Name":"web","Count":1,"Tasks":[{"Name":"main","Driver":"native","Config":{"command":"/bin/sleep","args":["60"]},"Resources":{"CPU":100,"MemoryMB":64}}]}]}}`

// TestForward_RealCluster runs the API over three real servers (in-memory
// Raft, no in-process forwarding) and checks that writes, consistent reads
// and operator calls sent to a follower's HTTP API are answered by the
// leader's.
func TestForward_RealCluster(t *testing.T) {
	c := servertest.NewCluster(t, 3, servertest.WithConfig(func(cfg *server.Config) { cfg.LeaderLookup = nil }))
	c.WaitForLeader()
	var mu sync.Mutex
	urls := map[string]string{}
	api := make([]*httptest.Server, c.Size())
	for i := 0; i < c.Size(); i++ {
		api[i] = serve(t, routedServer{Server: c.Server(i), mu: &mu, urls: urls})
		mu.Lock()
		urls[c.Addr(i)] = hostOf(api[i])
		mu.Unlock()
	}
	f := c.Follower()
	follower := api[f].URL

	put := func(id string) {
		t.Helper()
		resp, body := doReq(t, "PUT", follower+"/v1/jobs", strings.ReplaceAll(realJobBody, "%s", id))
		if resp.StatusCode != 200 {
			t.Fatalf("register %s on a follower: %d %s", id, resp.StatusCode, body)
		}
	}
	put("kept")
	if resp, body := doReq(t, "GET", follower+"/v1/job/kept?consistent", ""); resp.StatusCode != 200 || !strings.Contains(body, `"kept"`) {
		t.Fatalf("consistent read on a follower: %d %s", resp.StatusCode, body)
	}
	resp, body := doReq(t, "GET", follower+"/v1/operator/raft/configuration", "")
	var conf OperatorRaftConfiguration
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &conf) != nil || len(conf.Servers) != 3 {
		t.Fatalf("raft configuration: %d %s", resp.StatusCode, body)
	}
	if resp, body := doReq(t, "DELETE", follower+"/v1/operator/raft/peer?id=no-such-server", ""); resp.StatusCode != 404 {
		t.Fatalf("remove unknown peer through a follower: %d %s", resp.StatusCode, body)
	}

	// Snapshot save through the follower (streamed from the leader), a
	// later write, then restore through the follower: the write is gone.
	sresp, err := http.Get(follower + "/v1/operator/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(sresp.Body)
	sresp.Body.Close()
	if err != nil || sresp.StatusCode != 200 || !bytes.HasPrefix(archive, []byte(server.ArchiveMagic)) {
		t.Fatalf("snapshot save: %d %v, %d bytes", sresp.StatusCode, err, len(archive))
	}
	put("dropped")
	req, err := http.NewRequest("PUT", follower+"/v1/operator/snapshot", bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	rresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rbody, _ := io.ReadAll(rresp.Body)
	rresp.Body.Close()
	if rresp.StatusCode != 200 {
		t.Fatalf("snapshot restore through a follower: %d %s", rresp.StatusCode, rbody)
	}
	c.WaitForConvergence(20 * time.Second)
	for i, s := range c.Servers() {
		kept, _ := s.State().JobByID(nil, "kept")
		dropped, _ := s.State().JobByID(nil, "dropped")
		if kept == nil || dropped != nil {
			t.Errorf("server %d after restore: kept=%v dropped=%v", i, kept != nil, dropped != nil)
		}
	}
}
