package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/gpulayer/gpulayer/structs"
)

// secretRotator is implemented by server connections that can give the
// node a new secret: *server.Server in-process and HTTPServerConn (PUT
// /v1/node/{id}/secret/rotate, authenticated by the current secret).
type secretRotator interface {
	NodeSecretRotate(ctx context.Context, nodeID, secret string) (string, error)
}

// RotateNodeSecret asks the servers for a new node secret, then stores it
// (the node-secret file, replaced atomically, and the node this client
// registers and authenticates with). From the server's Raft entry on the
// old secret is refused; this client keeps working with the new one. It
// returns an error wrapping structs.ErrInvalid when the server connection
// cannot rotate secrets. When the new secret cannot be written to disk the
// running client still uses it, and the error says so (a restart would
// then present the old one and be refused).
func (c *Client) RotateNodeSecret(ctx context.Context) error {
	rot, ok := c.cfg.Servers.(secretRotator)
	if !ok {
		return fmt.Errorf("%w: this client's server connection cannot rotate node secrets", structs.ErrInvalid)
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	id := c.nodeID()
	secret, err := rot.NodeSecretRotate(ctx, id, structs.GenerateUUID())
	if err != nil {
		return fmt.Errorf("rotate node secret: %w", err)
	}
	c.mu.Lock()
	n := c.node.Copy()
	n.SecretID = secret
	c.node = n
	c.mu.Unlock()
	if err := writeSecretFile(c.cfg.DataDir, "node-secret", secret); err != nil {
		return fmt.Errorf("rotate node secret: the running client uses the new secret, but %w", err)
	}
	c.logger.Info("node secret rotated", "node_id", id)
	return nil
}

// writeSecretFile replaces dir/name with value (mode 0600) through a
// temporary file and a rename.
func writeSecretFile(dir, name, value string) error {
	p := filepath.Join(dir, name)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(value+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}

// NodeSecretRotate implements secretRotator: PUT
// /v1/node/{id}/secret/rotate with the node's current secret, proposing
// secret; the new one is used for every later call. When the call fails
// without a refusal (the answer may have been lost after the servers
// recorded it), a heartbeat with the proposed secret tells whether the
// rotation happened, so the client is never left holding a secret the
// servers no longer accept.
func (c *HTTPServerConn) NodeSecretRotate(ctx context.Context, nodeID, secret string) (string, error) {
	var out struct {
		NodeID   string
		SecretID string
	}
	path := "/v1/node/" + url.PathEscape(nodeID) + "/secret/rotate"
	if _, err := c.call(ctx, "PUT", path, nil, nodeID, struct{ SecretID string }{secret}, &out, 0); err != nil {
		if errors.Is(err, structs.ErrPermissionDenied) || errors.Is(err, structs.ErrInvalid) || errors.Is(err, structs.ErrNotFound) {
			return "", err
		}
		c.mu.Lock()
		old := c.secrets[nodeID]
		c.secrets[nodeID] = secret
		c.mu.Unlock()
		if _, herr := c.NodeUpdateStatus(ctx, nodeID, structs.NodeStatusReady); herr == nil {
			return secret, nil
		}
		c.mu.Lock()
		c.secrets[nodeID] = old
		c.mu.Unlock()
		return "", err
	}
	if out.SecretID == "" {
		return "", fmt.Errorf("node secret rotate: the server answered no SecretID")
	}
	c.mu.Lock()
	c.secrets[nodeID] = out.SecretID
	c.mu.Unlock()
	return out.SecretID, nil
}
