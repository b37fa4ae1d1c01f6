package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"sync"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// maxACLCacheEntries bounds the resolved-token cache; when full it is
// emptied (every entry is rebuilt on next use).
const maxACLCacheEntries = 4096

// AnonymousToken is the token of requests without a secret (Nomad's
// AnonymousACLToken): its one policy is the "anonymous" policy.
var AnonymousToken = &structs.ACLToken{
	AccessorID: "anonymous",
	Name:       "Anonymous Token",
	Type:       structs.ACLTokenTypeClient,
	Policies:   []string{structs.AnonymousPolicyName},
}

// aclCache holds compiled ACLs by the SHA-256 of their secret, valid while
// the ACL tables' Raft index is the one they were built at. The zero value
// is ready.
type aclCache struct {
	mu      sync.Mutex
	index   uint64
	entries map[[32]byte]*aclCacheEntry
}

type aclCacheEntry struct {
	acl   *structs.ACL
	token *structs.ACLToken
}

func (c *aclCache) get(index uint64, key [32]byte) *aclCacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.index != index {
		return nil
	}
	return c.entries[key]
}

func (c *aclCache) put(index uint64, key [32]byte, e *aclCacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.index != index || c.entries == nil || len(c.entries) >= maxACLCacheEntries {
		c.index, c.entries = index, map[[32]byte]*aclCacheEntry{}
	}
	c.entries[key] = e
}

// ResolveToken returns the compiled ACL of secret and its token, from this
// server's state (a follower's may lag the leader by a few entries).
// An empty secret resolves to the anonymous token: the "anonymous"
// policy's rules when that policy exists, else nothing allowed. A secret
// that names no token returns an error wrapping structs.ErrACLTokenNotFound
// (itself wrapping structs.ErrPermissionDenied); an expired token one
// wrapping structs.ErrACLTokenExpired. Results are cached until the ACL
// tables change; expiry is checked on every call. The secret is never
// logged, and the stored secret is compared in constant time.
func (s *Server) ResolveToken(secret string) (*structs.ACL, *structs.ACLToken, error) {
	st := s.fsm.State()
	index, err := st.ACLIndex()
	if err != nil {
		return nil, nil, err
	}
	key := sha256.Sum256([]byte(secret))
	e := s.acls.get(index, key)
	if e == nil {
		e, err = s.buildACL(secret)
		if err != nil {
			return nil, nil, err
		}
		s.acls.put(index, key, e)
	}
	if e.token.IsExpired(time.Now()) {
		return nil, nil, structs.ErrACLTokenExpired
	}
	return e.acl, e.token, nil
}

// buildACL looks the secret's token up and compiles its policies.
func (s *Server) buildACL(secret string) (*aclCacheEntry, error) {
	st := s.fsm.State()
	if secret == "" {
		acl, err := s.compilePolicies(AnonymousToken.Policies)
		if err != nil {
			return nil, err
		}
		return &aclCacheEntry{acl: acl, token: AnonymousToken}, nil
	}
	tok, err := st.ACLTokenBySecret(nil, secret)
	if err != nil {
		return nil, err
	}
	if tok == nil || subtle.ConstantTimeCompare([]byte(tok.SecretID), []byte(secret)) != 1 {
		return nil, structs.ErrACLTokenNotFound
	}
	if tok.Type == structs.ACLTokenTypeManagement {
		return &aclCacheEntry{acl: structs.ManagementACL, token: tok}, nil
	}
	acl, err := s.compilePolicies(tok.Policies)
	if err != nil {
		return nil, err
	}
	return &aclCacheEntry{acl: acl, token: tok}, nil
}

// compilePolicies parses the named policies that exist (a token may name
// a policy deleted since) and merges them.
func (s *Server) compilePolicies(names []string) (*structs.ACL, error) {
	st := s.fsm.State()
	var rules []*structs.ACLPolicyRules
	for _, name := range names {
		p, err := st.ACLPolicyByName(nil, name)
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		r, err := ParseACLPolicy(p.Rules)
		if err != nil {
			// Policies are parsed before they are stored; one that no
			// longer parses (an older server's rules) grants nothing.
			s.logger.Warn("stored ACL policy does not parse; ignoring it", "policy", p.Name, "error", err)
			continue
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		return structs.DenyAllACL, nil
	}
	return structs.NewACL(rules), nil
}

// ACLBootstrapped reports whether the ACL system has been bootstrapped in
// this server's state.
func (s *Server) ACLBootstrapped() (bool, error) {
	b, err := s.fsm.State().ACLBootstrapped(nil)
	if err != nil {
		return false, fmt.Errorf("acl bootstrap state: %w", err)
	}
	return b != nil, nil
}
