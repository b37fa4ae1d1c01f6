package structs

import (
	"crypto/rand"
	"fmt"
)

// GenerateUUID returns a random RFC 4122 version 4 UUID such as
// "0d6e3b1c-7a2f-4e8a-9c51-2f1f0f3b8d11". IDs are made by endpoints, never by
// the FSM, so the FSM stays deterministic.
func GenerateUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read never fails on supported platforms (Go 1.24+).
		panic(fmt.Errorf("crypto/rand: %w", err))
	}
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ShortID returns the first 8 characters of a UUID, as the CLI shows it.
func ShortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
