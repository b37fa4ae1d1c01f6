package structs

import (
	"errors"
	"strings"
	"testing"
)

func TestParseArtifactRef(t *testing.T) {
	good := strings.Repeat("0a", 32)
	for in, ok := range map[string]bool{
		"artifact://sha256/" + good: true,
		good:                        true,
		"artifact://sha256/" + strings.ToUpper(good):  false,
		"artifact://sha512/" + good:                   false,
		"https://example.com/x":                       false,
		"artifact://sha256/" + good[:63]:              false,
		"artifact://sha256/" + good + "/../../etc":    false,
		"artifact://sha256/../../../../../etc/passwd": false,
		"": false,
	} {
		h, err := ParseArtifactRef(in)
		if ok != (err == nil) || ok && h != good {
			t.Errorf("ParseArtifactRef(%q) = %q, %v", in, h, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseArtifactRef(%q): error %v does not wrap ErrInvalid", in, err)
		}
	}
}

// FuzzParseArtifactRef: any input either parses to 64 lower-case hex
// characters (a safe path element) or fails with ErrInvalid; never a panic.
func FuzzParseArtifactRef(f *testing.F) {
	f.Add("artifact://sha256/" + strings.Repeat("ab", 32))
	f.Add("artifact://sha256/../x")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseArtifactRef(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			t.Fatalf("parsed %q to %q", s, h)
		}
	})
}
