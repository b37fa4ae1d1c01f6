package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/gpulayer/gpulayer/structs"
)

// AuthorizeNode checks a client's node secret against the SecretID stored
// for nodeID in this server's state. It returns nil when they match, an
// error wrapping structs.ErrNotFound when the node is not registered, and
// one wrapping structs.ErrPermissionDenied when the secret is empty or
// differs. The comparison takes the same time whatever the secret's
// content.
//
// A follower's state may lag the leader's by a few entries, and a client
// talks to any server: right after the leader acknowledged its
// registration (or a secret rotation), its next request can reach a
// follower that has not applied it yet. So a follower that refuses waits
// up to nodeAuthLagWait for the node's row to change and checks again
// before it answers; the leader answers at once. (Seen under load: a
// client's first artifact fetch, 60 ms after registering, refused with 403
// by a follower, which failed the task.)
func (s *Server) AuthorizeNode(nodeID, secret string) error {
	err := s.checkNodeSecret(nil, nodeID, secret)
	if err == nil || secret == "" || s.IsLeader() {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeAuthLagWait)
	defer cancel()
	for {
		ws := memdb.NewWatchSet()
		if err = s.checkNodeSecret(ws, nodeID, secret); err == nil {
			return nil
		}
		if ws.WatchCtx(ctx) != nil {
			return err
		}
	}
}

// nodeAuthLagWait bounds how long a follower waits for a node's
// registration to reach its state before refusing the node's secret: a few
// heartbeat intervals of the leader's log, and short enough that a caller
// with a wrong secret learns so soon.
const nodeAuthLagWait = time.Second

// checkNodeSecret is AuthorizeNode's check against this server's state as
// it is now, watching the node's row in ws when ws is not nil.
func (s *Server) checkNodeSecret(ws memdb.WatchSet, nodeID, secret string) error {
	node, err := s.fsm.State().NodeByID(ws, nodeID)
	if err != nil {
		return fmt.Errorf("authorize node %s: %w", nodeID, err)
	}
	if node == nil {
		return fmt.Errorf("node %s: %w", nodeID, structs.ErrNotFound)
	}
	if secret == "" || subtle.ConstantTimeCompare([]byte(node.SecretID), []byte(secret)) != 1 {
		return fmt.Errorf("node %s: %w: node secret does not match", nodeID, structs.ErrPermissionDenied)
	}
	return nil
}

// NodeSecret returns the SecretID this server's state holds for nodeID, so
// an agent proxying a user's request to that node's agent (logs, exec,
// signal, restart, telemetry) authenticates to it as the cluster and never
// with the user's token. A node registered by a node-write holder only
// ever receives its own secret this way. Errors wrap structs.ErrNotFound
// for an unknown node.
func (s *Server) NodeSecret(nodeID string) (string, error) {
	node, err := s.fsm.State().NodeByID(nil, nodeID)
	if err != nil {
		return "", fmt.Errorf("node %s: %w", nodeID, err)
	}
	if node == nil || node.SecretID == "" {
		return "", fmt.Errorf("node %s: %w", nodeID, structs.ErrNotFound)
	}
	return node.SecretID, nil
}
