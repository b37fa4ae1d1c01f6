package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/structs"
	"github.com/hashicorp/go-memdb"
)

// ACL endpoints. Writes run on the leader (agent/http forwards them there)
// and return errors wrapping structs.ErrNotLeader elsewhere; every write
// validates its input first (errors wrap structs.ErrInvalid and name the
// field). Reads answer from this server's state and are blocking queries
// on their table.

// ACLBootstrap creates the first management token (Nomad's ACL.Bootstrap)
// and returns it with its SecretID. A second call returns an error
// wrapping structs.ErrACLBootstrapped; the FSM refuses it too, so two
// racing bootstraps cannot both succeed.
func (s *Server) ACLBootstrap(ctx context.Context) (*structs.ACLToken, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.ACLBootstrap(fctx)
	}
	if err := s.checkLeader(); err != nil {
		return nil, err
	}
	if done, err := s.ACLBootstrapped(); err != nil {
		return nil, err
	} else if done {
		return nil, structs.ErrACLBootstrapped
	}
	now := time.Now().UTC()
	tok := &structs.ACLToken{
		AccessorID: structs.GenerateUUID(),
		SecretID:   structs.GenerateUUID(),
		Name:       "Bootstrap Token",
		Type:       structs.ACLTokenTypeManagement,
		Global:     true,
		CreateTime: now,
	}
	if _, _, err := s.raftApply(structs.ACLBootstrapRequestType, &structs.ACLBootstrapRequest{Token: tok, BootstrapTime: now.UnixNano()}); err != nil {
		return nil, fmt.Errorf("acl bootstrap: %w", err)
	}
	return s.storedToken(tok.AccessorID)
}

func (s *Server) storedToken(accessor string) (*structs.ACLToken, error) {
	t, err := s.fsm.State().ACLTokenByAccessor(nil, accessor)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("ACL token %q: %w", accessor, structs.ErrNotFound)
	}
	return t.Copy(), nil
}

// ACLPolicyUpsert creates or replaces one policy after parsing its rules
// (ParseACLPolicy) and returns the Raft index. Errors wrap
// structs.ErrInvalid for a bad name (ValidACLName), a description over
// structs.MaxACLPolicyDescriptionLen or rules that do not parse.
func (s *Server) ACLPolicyUpsert(ctx context.Context, p *structs.ACLPolicy) (uint64, error) {
	if p == nil {
		return 0, fmt.Errorf("%w: policy: missing", structs.ErrInvalid)
	}
	if err := structs.ValidACLName("Name", p.Name); err != nil {
		return 0, err
	}
	if len(p.Description) > structs.MaxACLPolicyDescriptionLen {
		return 0, fmt.Errorf("%w: Description: %d bytes, at most %d", structs.ErrInvalid, len(p.Description), structs.MaxACLPolicyDescriptionLen)
	}
	if _, err := ParseACLPolicy(p.Rules); err != nil {
		return 0, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.ACLPolicyUpsert(fctx, p)
	}
	if err := s.checkLeader(); err != nil {
		return 0, err
	}
	c := &structs.ACLPolicy{Name: p.Name, Description: p.Description, Rules: p.Rules}
	_, index, err := s.raftApply(structs.ACLPolicyUpsertRequestType, &structs.ACLPolicyUpsertRequest{Policies: []*structs.ACLPolicy{c}})
	if err != nil {
		return 0, fmt.Errorf("acl policy upsert %q: %w", p.Name, err)
	}
	return index, nil
}

// ACLPolicyDelete removes a policy. Errors wrap structs.ErrNotFound when it
// does not exist.
func (s *Server) ACLPolicyDelete(ctx context.Context, name string) (uint64, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.ACLPolicyDelete(fctx, name)
	}
	if err := s.checkLeader(); err != nil {
		return 0, err
	}
	_, index, err := s.raftApply(structs.ACLPolicyDeleteRequestType, &structs.ACLPolicyDeleteRequest{Names: []string{name}})
	if err != nil {
		return 0, fmt.Errorf("acl policy delete %q: %w", name, err)
	}
	return index, nil
}

// ACLPolicyList returns every policy (blocking query on the policies
// table).
func (s *Server) ACLPolicyList(ctx context.Context, q *structs.QueryOptions) ([]*structs.ACLPolicy, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		idx, err := st.Index(state.TableACLPolicies)
		if err != nil {
			return nil, 0, err
		}
		ps, err := st.ACLPolicies(ws)
		return ps, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.ACLPolicy), meta, nil
}

// ACLPolicyGet returns one policy; errors wrap structs.ErrNotFound when it
// does not exist.
func (s *Server) ACLPolicyGet(ctx context.Context, name string, q *structs.QueryOptions) (*structs.ACLPolicy, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		idx, err := st.Index(state.TableACLPolicies)
		if err != nil {
			return nil, 0, err
		}
		p, err := st.ACLPolicyByName(ws, name)
		return p, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	p := resp.(*structs.ACLPolicy)
	if p == nil {
		return nil, meta, fmt.Errorf("ACL policy %q: %w", name, structs.ErrNotFound)
	}
	return p, meta, nil
}

// ACLTokenUpsert creates a token (t.AccessorID empty: new AccessorID and
// SecretID, CreateTime now, ExpirationTime from ExpirationTTL) or updates
// the named token's Name, Type and Policies (its secret and times stay).
// It returns the stored token with its secret. Errors wrap
// structs.ErrInvalid for an unknown Type, a client token without policies
// or a management token with some, a policy that does not exist, more than
// structs.MaxACLTokenPolicies policies, a TTL that is negative or over
// structs.MaxACLTokenTTL, or a name over structs.MaxACLPolicyNameLen bytes;
// structs.ErrNotFound for an update of an unknown AccessorID.
func (s *Server) ACLTokenUpsert(ctx context.Context, t *structs.ACLToken) (*structs.ACLToken, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: token: missing", structs.ErrInvalid)
	}
	if err := s.validateToken(t); err != nil {
		return nil, err
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.ACLTokenUpsert(fctx, t)
	}
	if err := s.checkLeader(); err != nil {
		return nil, err
	}
	c := &structs.ACLToken{AccessorID: t.AccessorID, Name: t.Name, Type: t.Type, Policies: append([]string(nil), t.Policies...), Global: t.Global}
	if c.AccessorID == "" {
		now := time.Now().UTC()
		c.AccessorID, c.SecretID, c.CreateTime = structs.GenerateUUID(), structs.GenerateUUID(), now
		if t.ExpirationTTL > 0 {
			exp := now.Add(t.ExpirationTTL)
			c.ExpirationTime, c.ExpirationTTL = &exp, t.ExpirationTTL
		} else if t.ExpirationTime != nil {
			exp := t.ExpirationTime.UTC()
			if !exp.After(now) {
				return nil, fmt.Errorf("%w: ExpirationTime: %s is not in the future", structs.ErrInvalid, exp.Format(time.RFC3339))
			}
			c.ExpirationTime = &exp
		}
	} else {
		old, err := s.fsm.State().ACLTokenByAccessor(nil, c.AccessorID)
		if err != nil {
			return nil, err
		}
		if old == nil {
			return nil, fmt.Errorf("ACL token %q: %w", c.AccessorID, structs.ErrNotFound)
		}
		c.ExpirationTime, c.ExpirationTTL = old.ExpirationTime, old.ExpirationTTL
	}
	if _, _, err := s.raftApply(structs.ACLTokenUpsertRequestType, &structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{c}}); err != nil {
		return nil, fmt.Errorf("acl token upsert: %w", err)
	}
	return s.storedToken(c.AccessorID)
}

func (s *Server) validateToken(t *structs.ACLToken) error {
	if len(t.Name) > structs.MaxACLPolicyNameLen {
		return fmt.Errorf("%w: Name: %d bytes, at most %d", structs.ErrInvalid, len(t.Name), structs.MaxACLPolicyNameLen)
	}
	switch t.Type {
	case structs.ACLTokenTypeClient:
		if len(t.Policies) == 0 {
			return fmt.Errorf("%w: Policies: a client token needs at least one policy", structs.ErrInvalid)
		}
	case structs.ACLTokenTypeManagement:
		if len(t.Policies) != 0 {
			return fmt.Errorf("%w: Policies: a management token takes no policies", structs.ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: Type: %q, want %q or %q", structs.ErrInvalid, t.Type, structs.ACLTokenTypeClient, structs.ACLTokenTypeManagement)
	}
	if len(t.Policies) > structs.MaxACLTokenPolicies {
		return fmt.Errorf("%w: Policies: %d, at most %d", structs.ErrInvalid, len(t.Policies), structs.MaxACLTokenPolicies)
	}
	if t.ExpirationTTL < 0 || t.ExpirationTTL > structs.MaxACLTokenTTL {
		return fmt.Errorf("%w: ExpirationTTL: %s, want 0 to %s", structs.ErrInvalid, t.ExpirationTTL, structs.MaxACLTokenTTL)
	}
	st := s.fsm.State()
	for i, name := range t.Policies {
		if err := structs.ValidACLName(fmt.Sprintf("Policies[%d]", i), name); err != nil {
			return err
		}
		p, err := st.ACLPolicyByName(nil, name)
		if err != nil {
			return err
		}
		if p == nil {
			return fmt.Errorf("%w: Policies[%d]: policy %q does not exist", structs.ErrInvalid, i, name)
		}
	}
	return nil
}

// ACLTokenDelete removes a token by AccessorID. Errors wrap
// structs.ErrNotFound when it does not exist.
func (s *Server) ACLTokenDelete(ctx context.Context, accessor string) (uint64, error) {
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.ACLTokenDelete(fctx, accessor)
	}
	if err := s.checkLeader(); err != nil {
		return 0, err
	}
	_, index, err := s.raftApply(structs.ACLTokenDeleteRequestType, &structs.ACLTokenDeleteRequest{AccessorIDs: []string{accessor}})
	if err != nil {
		return 0, fmt.Errorf("acl token delete %q: %w", accessor, err)
	}
	return index, nil
}

// ACLTokenList returns every token, with secrets (the HTTP layer redacts
// them for readers that are not management).
func (s *Server) ACLTokenList(ctx context.Context, q *structs.QueryOptions) ([]*structs.ACLToken, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		idx, err := st.Index(state.TableACLTokens)
		if err != nil {
			return nil, 0, err
		}
		ts, err := st.ACLTokens(ws)
		return ts, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	return resp.([]*structs.ACLToken), meta, nil
}

// ACLTokenGet returns one token by AccessorID, with its secret; errors
// wrap structs.ErrNotFound when it does not exist.
func (s *Server) ACLTokenGet(ctx context.Context, accessor string, q *structs.QueryOptions) (*structs.ACLToken, structs.QueryMeta, error) {
	resp, meta, err := s.blockingQuery(ctx, q, func(ws memdb.WatchSet, st *state.StateStore) (interface{}, uint64, error) {
		idx, err := st.Index(state.TableACLTokens)
		if err != nil {
			return nil, 0, err
		}
		t, err := st.ACLTokenByAccessor(ws, accessor)
		return t, idx, err
	})
	if err != nil {
		return nil, meta, err
	}
	t := resp.(*structs.ACLToken)
	if t == nil {
		return nil, meta, fmt.Errorf("ACL token %q: %w", accessor, structs.ErrNotFound)
	}
	return t.Copy(), meta, nil
}

// maxNodeSecretLen bounds a node secret a client proposes, in bytes.
const maxNodeSecretLen = 128

// NodeSecretRotate gives the node a new secret through Raft and returns
// it; from that entry on the old secret is refused. secret is the new
// secret the node's own client proposes (so it can tell, when the answer
// is lost, whether the rotation happened), or "" for one made here. The
// caller (the node's client, proven by its current secret) stores it.
// Errors wrap structs.ErrNotFound for an unknown node and
// structs.ErrInvalid for a proposed secret shorter than 16 or longer than
// 128 bytes.
func (s *Server) NodeSecretRotate(ctx context.Context, nodeID, secret string) (string, error) {
	if secret != "" && (len(secret) < 16 || len(secret) > maxNodeSecretLen) {
		return "", fmt.Errorf("%w: SecretID: %d bytes, want 16 to %d", structs.ErrInvalid, len(secret), maxNodeSecretLen)
	}
	if l, fctx := s.forwardTarget(ctx); l != nil {
		return l.NodeSecretRotate(fctx, nodeID, secret)
	}
	if err := s.checkLeader(); err != nil {
		return "", err
	}
	if secret == "" {
		secret = structs.GenerateUUID()
	}
	if _, _, err := s.raftApply(structs.NodeSecretRotateRequestType, &structs.NodeSecretRotateRequest{NodeID: nodeID, SecretID: secret}); err != nil {
		if errors.Is(err, structs.ErrNotFound) {
			return "", err
		}
		return "", fmt.Errorf("node secret rotate %s: %w", nodeID, err)
	}
	return secret, nil
}
