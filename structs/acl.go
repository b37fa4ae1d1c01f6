package structs

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// ACL token types (Nomad's ACLClientToken and ACLManagementToken).
const (
	ACLTokenTypeClient     = "client"
	ACLTokenTypeManagement = "management"
)

// AnonymousPolicyName is the policy whose rules apply to requests without a
// token. When no policy of that name exists, anonymous requests may do
// nothing.
const AnonymousPolicyName = "anonymous"

// Policy levels of a rule (Nomad's names). "scale" exists only for
// namespaces; "list" only for node, agent and operator in Nomad, where it
// means read here.
const (
	PolicyDeny  = "deny"
	PolicyRead  = "read"
	PolicyWrite = "write"
	PolicyScale = "scale"
	PolicyList  = "list"
)

// Namespace capabilities, Nomad's names. A policy level expands to a set of
// them (see NamespacePolicyCapabilities).
const (
	NamespaceCapabilityDeny                 = "deny"
	NamespaceCapabilityListJobs             = "list-jobs"
	NamespaceCapabilityParseJob             = "parse-job"
	NamespaceCapabilityReadJob              = "read-job"
	NamespaceCapabilitySubmitJob            = "submit-job"
	NamespaceCapabilityDispatchJob          = "dispatch-job"
	NamespaceCapabilityReadLogs             = "read-logs"
	NamespaceCapabilityReadFS               = "read-fs"
	NamespaceCapabilityAllocExec            = "alloc-exec"
	NamespaceCapabilityAllocNodeExec        = "alloc-node-exec"
	NamespaceCapabilityAllocLifecycle       = "alloc-lifecycle"
	NamespaceCapabilityReadJobScaling       = "read-job-scaling"
	NamespaceCapabilityScaleJob             = "scale-job"
	NamespaceCapabilityListScalingPolicies  = "list-scaling-policies"
	NamespaceCapabilityReadScalingPolicy    = "read-scaling-policy"
	NamespaceCapabilitySubmitRecommendation = "submit-recommendation"
	NamespaceCapabilitySentinelOverride     = "sentinel-override"
	NamespaceCapabilityCSIListVolume        = "csi-list-volume"
	NamespaceCapabilityCSIReadVolume        = "csi-read-volume"
	NamespaceCapabilityCSIWriteVolume       = "csi-write-volume"
	NamespaceCapabilityCSIMountVolume       = "csi-mount-volume"
	NamespaceCapabilityCSIRegisterPlugin    = "csi-register-plugin"
)

// knownNamespaceCapabilities lists every capability a policy may name.
var knownNamespaceCapabilities = map[string]bool{
	NamespaceCapabilityDeny: true, NamespaceCapabilityListJobs: true, NamespaceCapabilityParseJob: true,
	NamespaceCapabilityReadJob: true, NamespaceCapabilitySubmitJob: true, NamespaceCapabilityDispatchJob: true,
	NamespaceCapabilityReadLogs: true, NamespaceCapabilityReadFS: true, NamespaceCapabilityAllocExec: true,
	NamespaceCapabilityAllocNodeExec: true, NamespaceCapabilityAllocLifecycle: true,
	NamespaceCapabilityReadJobScaling: true, NamespaceCapabilityScaleJob: true,
	NamespaceCapabilityListScalingPolicies: true, NamespaceCapabilityReadScalingPolicy: true,
	NamespaceCapabilitySubmitRecommendation: true, NamespaceCapabilitySentinelOverride: true,
	NamespaceCapabilityCSIListVolume: true, NamespaceCapabilityCSIReadVolume: true,
	NamespaceCapabilityCSIWriteVolume: true, NamespaceCapabilityCSIMountVolume: true,
	NamespaceCapabilityCSIRegisterPlugin: true,
}

// ValidNamespaceCapability reports whether c is a capability name a policy
// may use.
func ValidNamespaceCapability(c string) bool { return knownNamespaceCapabilities[c] }

// NamespacePolicyCapabilities returns the capabilities a namespace policy
// level grants, as Nomad expands them (acl/policy.go expandNamespacePolicy).
// An unknown level returns nil.
func NamespacePolicyCapabilities(policy string) []string {
	read := []string{NamespaceCapabilityListJobs, NamespaceCapabilityParseJob, NamespaceCapabilityReadJob,
		NamespaceCapabilityCSIListVolume, NamespaceCapabilityCSIReadVolume, NamespaceCapabilityReadJobScaling,
		NamespaceCapabilityListScalingPolicies, NamespaceCapabilityReadScalingPolicy}
	switch policy {
	case PolicyDeny:
		return []string{NamespaceCapabilityDeny}
	case PolicyRead:
		return read
	case PolicyWrite:
		return append(read, NamespaceCapabilityScaleJob, NamespaceCapabilitySubmitJob, NamespaceCapabilityDispatchJob,
			NamespaceCapabilityReadLogs, NamespaceCapabilityReadFS, NamespaceCapabilityAllocExec,
			NamespaceCapabilityAllocLifecycle, NamespaceCapabilityCSIMountVolume, NamespaceCapabilityCSIWriteVolume,
			NamespaceCapabilitySubmitRecommendation)
	case PolicyScale:
		return []string{NamespaceCapabilityListScalingPolicies, NamespaceCapabilityReadScalingPolicy,
			NamespaceCapabilityReadJobScaling, NamespaceCapabilityScaleJob}
	}
	return nil
}

// ACLPolicy is a named set of rules in HCL (Nomad's ACLPolicy, same JSON
// field names). Rules is the policy source; the server parses it on write
// and refuses a policy that does not parse.
type ACLPolicy struct {
	Name        string
	Description string
	Rules       string
	CreateIndex uint64
	ModifyIndex uint64
}

// ACLPolicyListStub is a policy in a list: no rules.
type ACLPolicyListStub struct {
	Name        string
	Description string
	CreateIndex uint64
	ModifyIndex uint64
}

// Stub returns the list form of p.
func (p *ACLPolicy) Stub() *ACLPolicyListStub {
	return &ACLPolicyListStub{Name: p.Name, Description: p.Description, CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex}
}

// ACLToken is a bearer token (Nomad's ACLToken, same JSON field names).
// SecretID is the bearer secret; AccessorID names the token in reads and
// deletes. A management token may do anything; a client token may do what
// its Policies allow. Times are UTC.
type ACLToken struct {
	AccessorID string
	SecretID   string
	Name       string
	// Type is ACLTokenTypeClient or ACLTokenTypeManagement.
	Type     string
	Policies []string
	// Global is kept for Nomad's shape; GPUlayer has one region.
	Global     bool
	CreateTime time.Time
	// ExpirationTime, when set, is when the token stops working.
	ExpirationTime *time.Time `json:",omitempty"`
	// ExpirationTTL is the lifetime asked for at creation (nanoseconds in
	// JSON, as Nomad encodes it); the server turns it into ExpirationTime.
	ExpirationTTL time.Duration `json:",omitempty"`
	CreateIndex   uint64
	ModifyIndex   uint64
}

// ACLTokenListStub is a token in a list: no secret.
type ACLTokenListStub struct {
	AccessorID     string
	Name           string
	Type           string
	Policies       []string
	Global         bool
	CreateTime     time.Time
	ExpirationTime *time.Time `json:",omitempty"`
	CreateIndex    uint64
	ModifyIndex    uint64
}

// Stub returns the list form of t, without its secret.
func (t *ACLToken) Stub() *ACLTokenListStub {
	return &ACLTokenListStub{AccessorID: t.AccessorID, Name: t.Name, Type: t.Type, Policies: append([]string(nil), t.Policies...),
		Global: t.Global, CreateTime: t.CreateTime, ExpirationTime: t.ExpirationTime, CreateIndex: t.CreateIndex, ModifyIndex: t.ModifyIndex}
}

// Copy returns a deep copy of t.
func (t *ACLToken) Copy() *ACLToken {
	if t == nil {
		return nil
	}
	c := *t
	c.Policies = append([]string(nil), t.Policies...)
	if t.ExpirationTime != nil {
		e := *t.ExpirationTime
		c.ExpirationTime = &e
	}
	return &c
}

// Redacted returns a copy of t without its SecretID, for readers that may
// see the token but not use it.
func (t *ACLToken) Redacted() *ACLToken {
	c := t.Copy()
	c.SecretID = ""
	return c
}

// IsExpired reports whether t has an ExpirationTime at or before now.
func (t *ACLToken) IsExpired(now time.Time) bool {
	return t.ExpirationTime != nil && !t.ExpirationTime.After(now)
}

// Bounds on ACL objects, so one request cannot make the server compile
// without end.
const (
	// MaxACLPolicyNameLen bounds policy and token names, in bytes.
	MaxACLPolicyNameLen = 128
	// MaxACLPolicyRulesBytes bounds a policy's Rules source: 64 KiB.
	MaxACLPolicyRulesBytes = 64 << 10
	// MaxACLPolicyDescriptionLen bounds a policy's Description, in bytes.
	MaxACLPolicyDescriptionLen = 1024
	// MaxACLPolicyRules bounds the namespace rules of one policy.
	MaxACLPolicyRules = 256
	// MaxACLTokenPolicies bounds the policies of one token.
	MaxACLTokenPolicies = 64
	// MaxACLTokenTTL bounds ExpirationTTL: ten years.
	MaxACLTokenTTL = 10 * 365 * 24 * time.Hour
)

// ValidACLName checks a policy or token name: 1 to MaxACLPolicyNameLen
// bytes of letters, digits, '-' and '_' (Nomad's validPolicyName). field
// names the value in the error, which wraps ErrInvalid.
func ValidACLName(field, name string) error {
	if name == "" || len(name) > MaxACLPolicyNameLen {
		return fmt.Errorf("%w: %s: must be 1 to %d characters, got %d", ErrInvalid, field, MaxACLPolicyNameLen, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("%w: %s: %q may hold only letters, digits, '-' and '_'", ErrInvalid, field, name)
		}
	}
	return nil
}

// ACLNamespaceRule is one parsed `namespace "NAME" { policy capabilities }`
// block. Name may hold '*' wildcards.
type ACLNamespaceRule struct {
	Name         string
	Policy       string
	Capabilities []string
}

// ACLPolicyRules is a parsed policy: its namespace rules and the levels of
// its node, agent and operator rules ("" when the block is absent).
type ACLPolicyRules struct {
	Namespaces []*ACLNamespaceRule
	Node       string
	Agent      string
	Operator   string
}

// ACLBootstrap records that the ACL system was bootstrapped: at which Raft
// index and time (Unix nanoseconds, set by the endpoint). There is at most
// one, with ID "acl-bootstrap".
type ACLBootstrap struct {
	ID            string
	BootstrapTime int64
	CreateIndex   uint64
}

// ACLBootstrapID is the ID of the one ACLBootstrap row.
const ACLBootstrapID = "acl-bootstrap"

// ErrACLBootstrapped is returned by a second bootstrap (HTTP 400, as
// Nomad's "ACL bootstrap already done").
var ErrACLBootstrapped error = &aclError{msg: "ACL bootstrap already done", kind: ErrInvalid}

// ErrACLTokenNotFound is returned for a secret that names no token, or an
// expired one (HTTP 403 "ACL token not found", as Nomad answers).
var ErrACLTokenNotFound error = &aclError{msg: "ACL token not found", kind: ErrPermissionDenied}

// ErrACLTokenExpired is returned for an expired token.
var ErrACLTokenExpired error = &aclError{msg: "ACL token expired", kind: ErrPermissionDenied}

// ACLPolicyUpsertRequest is the Raft entry that creates or replaces
// policies (already parsed and validated by the endpoint).
type ACLPolicyUpsertRequest struct {
	Policies []*ACLPolicy
}

// ACLPolicyDeleteRequest removes policies by name.
type ACLPolicyDeleteRequest struct {
	Names []string
}

// ACLTokenUpsertRequest creates or replaces tokens; AccessorID, SecretID
// and CreateTime come from the endpoint.
type ACLTokenUpsertRequest struct {
	Tokens []*ACLToken
}

// ACLTokenDeleteRequest removes tokens by AccessorID.
type ACLTokenDeleteRequest struct {
	AccessorIDs []string
}

// ACLBootstrapRequest creates the first management token and records the
// bootstrap; the FSM refuses it when a bootstrap is already recorded.
type ACLBootstrapRequest struct {
	Token         *ACLToken
	BootstrapTime int64 // Unix nanoseconds
}

// NodeSecretRotateRequest replaces a node's SecretID. The endpoint makes
// the new secret; the old one is refused from this entry on.
type NodeSecretRotateRequest struct {
	NodeID   string
	SecretID string
}

// ACL is a compiled capability set: what one token may do. The zero value
// (and nil) allows nothing. It is immutable once built and safe to share.
type ACL struct {
	management bool
	// exact holds namespace rules without wildcards; globs the others,
	// most specific first.
	exact                 map[string]map[string]bool
	globs                 []aclGlob
	node, agent, operator string
}

type aclGlob struct {
	pattern string
	caps    map[string]bool
}

// ManagementACL allows everything.
var ManagementACL = &ACL{management: true}

// DenyAllACL allows nothing.
var DenyAllACL = &ACL{}

// NewACL merges parsed policies into one ACL. Levels merge with deny
// winning over write over read; namespace capabilities of rules with the
// same name are joined, and a deny among them denies that namespace.
func NewACL(policies []*ACLPolicyRules) *ACL {
	a := &ACL{exact: map[string]map[string]bool{}}
	globs := map[string]map[string]bool{}
	for _, p := range policies {
		if p == nil {
			continue
		}
		for _, ns := range p.Namespaces {
			if ns == nil {
				continue
			}
			target := a.exact
			if strings.Contains(ns.Name, "*") {
				target = globs
			}
			caps := target[ns.Name]
			if caps == nil {
				caps = map[string]bool{}
				target[ns.Name] = caps
			}
			for _, c := range NamespacePolicyCapabilities(ns.Policy) {
				caps[c] = true
			}
			for _, c := range ns.Capabilities {
				caps[c] = true
			}
		}
		a.node = mergeLevel(a.node, p.Node)
		a.agent = mergeLevel(a.agent, p.Agent)
		a.operator = mergeLevel(a.operator, p.Operator)
	}
	for pat, caps := range globs {
		a.globs = append(a.globs, aclGlob{pattern: pat, caps: caps})
	}
	// Most specific first: more literal characters, then the pattern, for
	// a deterministic order.
	sort.Slice(a.globs, func(i, j int) bool {
		li, lj := globLiteral(a.globs[i].pattern), globLiteral(a.globs[j].pattern)
		if li != lj {
			return li > lj
		}
		return a.globs[i].pattern < a.globs[j].pattern
	})
	return a
}

func globLiteral(p string) int { return len(p) - strings.Count(p, "*") }

// mergeLevel joins two levels of a node, agent or operator rule: deny wins,
// then write, then read.
func mergeLevel(a, b string) string {
	if b == PolicyList {
		b = PolicyRead
	}
	switch {
	case a == PolicyDeny || b == PolicyDeny:
		return PolicyDeny
	case a == PolicyWrite || b == PolicyWrite:
		return PolicyWrite
	case a == PolicyRead || b == PolicyRead:
		return PolicyRead
	}
	return ""
}

// IsManagement reports whether a is a management token's ACL.
func (a *ACL) IsManagement() bool { return a != nil && a.management }

// AllowNamespaceOp reports whether a grants capability op in namespace ns.
// An exact rule for ns decides; otherwise the most specific matching
// wildcard rule does. A rule holding "deny" denies every op.
func (a *ACL) AllowNamespaceOp(ns, op string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	caps, ok := a.exact[ns]
	if !ok {
		for _, g := range a.globs {
			if globMatch(g.pattern, ns) {
				caps, ok = g.caps, true
				break
			}
		}
	}
	if !ok || caps[NamespaceCapabilityDeny] {
		return false
	}
	return caps[op]
}

// AllowNamespace reports whether a grants any capability in ns (Nomad's
// AllowNamespace), for routes that list across namespaces.
func (a *ACL) AllowNamespace(ns string) bool {
	if a.IsManagement() {
		return true
	}
	if a == nil {
		return false
	}
	caps, ok := a.exact[ns]
	if !ok {
		for _, g := range a.globs {
			if globMatch(g.pattern, ns) {
				caps, ok = g.caps, true
				break
			}
		}
	}
	return ok && !caps[NamespaceCapabilityDeny] && len(caps) > 0
}

func allowLevel(a *ACL, level func(*ACL) string, write bool) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	switch level(a) {
	case PolicyWrite:
		return true
	case PolicyRead:
		return !write
	}
	return false
}

// AllowNodeRead reports whether a may read nodes.
func (a *ACL) AllowNodeRead() bool {
	return allowLevel(a, func(a *ACL) string { return a.node }, false)
}

// AllowNodeWrite reports whether a may register and change nodes.
func (a *ACL) AllowNodeWrite() bool {
	return allowLevel(a, func(a *ACL) string { return a.node }, true)
}

// AllowAgentRead reports whether a may read agent information.
func (a *ACL) AllowAgentRead() bool {
	return allowLevel(a, func(a *ACL) string { return a.agent }, false)
}

// AllowAgentWrite reports whether a may change agents (join, ...).
func (a *ACL) AllowAgentWrite() bool {
	return allowLevel(a, func(a *ACL) string { return a.agent }, true)
}

// AllowOperatorRead reports whether a may read operator information.
func (a *ACL) AllowOperatorRead() bool {
	return allowLevel(a, func(a *ACL) string { return a.operator }, false)
}

// AllowOperatorWrite reports whether a may change the cluster's operation
// (Raft peers, garbage collection).
func (a *ACL) AllowOperatorWrite() bool {
	return allowLevel(a, func(a *ACL) string { return a.operator }, true)
}

// globMatch reports whether name matches pattern, where '*' matches any
// run of characters (possibly empty).
func globMatch(pattern, name string) bool {
	// Iterative matcher with backtracking to the last star: linear in
	// practice, O(len(pattern)*len(name)) at worst.
	p, n, star, mark := 0, 0, -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// ErrACLDisabled is returned by ACL endpoints on a cluster whose agent runs
// without ACLs (HTTP 400).
var ErrACLDisabled error = &aclError{msg: "ACL support disabled", kind: ErrInvalid}

// aclError is an ACL sentinel whose text is Nomad's exact message and
// which matches its kind (ErrInvalid, ErrPermissionDenied) with errors.Is.
type aclError struct {
	msg  string
	kind error
}

func (e *aclError) Error() string { return e.msg }

// Is reports whether target is the error's kind.
func (e *aclError) Is(target error) bool { return target == e.kind }
