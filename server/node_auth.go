package server

import (
	"crypto/subtle"
	"fmt"

	"github.com/gpulayer/gpulayer/structs"
)

// AuthorizeNode checks a client's node secret against the SecretID stored
// for nodeID in this server's state (a follower's state may lag the leader
// by a few entries). It returns nil when they match, an error wrapping
// structs.ErrNotFound when the node is not registered, and one wrapping
// structs.ErrPermissionDenied when the secret is empty or differs. The
// comparison takes the same time whatever the secret's content.
func (s *Server) AuthorizeNode(nodeID, secret string) error {
	node, err := s.fsm.State().NodeByID(nil, nodeID)
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
