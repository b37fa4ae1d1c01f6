package structs

import (
	"fmt"
	"unicode/utf8"
)

// Bounds of an EndpointMemberStatus a client reports (CheckWellFormed).
const (
	// MaxEndpointReasonBytes bounds EndpointMemberStatus.Reason.
	MaxEndpointReasonBytes = 512
	// MaxEndpointDigestBytes bounds each digest of an EndpointIdentity
	// ("sha256:" and 64 hex digits fit with room to spare).
	MaxEndpointDigestBytes = 128
)

// Copy returns a copy of the status, or nil.
func (s *EndpointMemberStatus) Copy() *EndpointMemberStatus {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

// CheckWellFormed refuses a member status no client would send: a Reason
// over MaxEndpointReasonBytes or not UTF-8, a digest over
// MaxEndpointDigestBytes or holding other than printable ASCII, or a
// negative UpdatedAt. Errors wrap ErrInvalid and name the field.
func (s *EndpointMemberStatus) CheckWellFormed() error {
	if s == nil {
		return nil
	}
	if len(s.Reason) > MaxEndpointReasonBytes {
		return fmt.Errorf("%w: EndpointMember.Reason is %d bytes, more than %d", ErrInvalid, len(s.Reason), MaxEndpointReasonBytes)
	}
	if !utf8.ValidString(s.Reason) {
		return fmt.Errorf("%w: EndpointMember.Reason is not UTF-8", ErrInvalid)
	}
	for name, d := range map[string]string{"ArtifactDigest": s.Identity.ArtifactDigest, "ConfigDigest": s.Identity.ConfigDigest} {
		if len(d) > MaxEndpointDigestBytes {
			return fmt.Errorf("%w: EndpointMember.Identity.%s is %d bytes, more than %d", ErrInvalid, name, len(d), MaxEndpointDigestBytes)
		}
		for i := 0; i < len(d); i++ {
			if d[i] <= ' ' || d[i] > '~' {
				return fmt.Errorf("%w: EndpointMember.Identity.%s holds a byte 0x%02x that is not printable ASCII", ErrInvalid, name, d[i])
			}
		}
	}
	if s.UpdatedAt < 0 {
		return fmt.Errorf("%w: EndpointMember.UpdatedAt is negative (%d)", ErrInvalid, s.UpdatedAt)
	}
	return nil
}
