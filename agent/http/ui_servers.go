package http

import (
	"net/http"
	"time"

	"github.com/gpulayer/gpulayer/server"
)

type peerRow struct {
	ID, Addr          string
	Leader, Voter     bool
	Gossip, GossipFor string
	Datacenter        string
	HTTPAddr          string
}

type statRow struct{ Key, Value string }

type serversView struct {
	pageBase
	Leader string
	Peers  []peerRow
	// LastContact says how long ago this server last heard from the
	// leader, in words.
	LastContact string
	Stats       []statRow
}

// serverStatKeys are the statistics the servers page shows, in order.
var serverStatKeys = []string{
	"server.name", "leader", "raft.state", "raft.term", "raft.last_contact", "raft.commit_index", "raft.applied_index",
	"raft.last_log_index", "raft.num_peers", "broker.total_ready", "broker.total_unacked", "blocked.total_blocked",
	"plan.queue_depth", "heartbeat.timers",
}

// raftMembers is what a multi-server build can say about its peers (the
// agent's *server.Server); the page falls back to Peers() without it.
type raftMembers interface {
	RaftPeers() ([]server.RaftPeer, error)
	Members() []server.Member
}

func (u *ui) serversPage(r *http.Request) (string, pageData, error) {
	v := &serversView{pageBase: pageBase{Nav: "servers", PollMillis: 5000}, Leader: u.h.srv.Leader()}
	stats := u.h.srv.Stats()
	switch lc := stats["raft.last_contact"]; {
	case stats["leader"] == "true":
		v.LastContact = "this server is the leader"
	case lc == "never" || lc == "":
		v.LastContact = "this server has never heard from a leader"
	default:
		v.LastContact = "this server last heard from the leader " + lc + " ago"
	}
	if rm, ok := u.h.srv.(raftMembers); ok {
		peers, err := rm.RaftPeers()
		if err != nil {
			return "", nil, err
		}
		members := map[string]server.Member{}
		for _, m := range rm.Members() {
			members[m.Name] = m
		}
		for _, p := range peers {
			row := peerRow{ID: p.ID, Addr: p.Address, Leader: p.Leader, Voter: p.Voter}
			if m, ok := members[p.ID]; ok {
				row.Gossip, row.Datacenter, row.HTTPAddr = m.Status, m.Datacenter, m.HTTPAddr
				if !m.StatusSince.IsZero() {
					row.GossipFor = u.now().Sub(m.StatusSince).Round(time.Second).String()
				}
			}
			v.Peers = append(v.Peers, row)
		}
	} else {
		for _, p := range u.h.srv.Peers() {
			v.Peers = append(v.Peers, peerRow{ID: p, Addr: p, Leader: p == v.Leader, Voter: true})
		}
	}
	for _, k := range serverStatKeys {
		if val, ok := stats[k]; ok {
			v.Stats = append(v.Stats, statRow{k, val})
		}
	}
	return "servers", v, nil
}

// exampleJob is the run page's starting text: the README's hello-gpu job.
const exampleJob = `job "hello-gpu" {
  type = "batch"

  group "hello" {
    task "main" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"gpus: $CUDA_VISIBLE_DEVICES\""]
      }
      resources {
        cpu    = 100 # MHz
        memory = 64  # MiB
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`

type runView struct {
	pageBase
	Example string
}

func (u *ui) runPage(r *http.Request) (string, pageData, error) {
	return "run", &runView{pageBase: pageBase{Nav: "run"}, Example: exampleJob}, nil
}
