package jobspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/convert"
	"github.com/gpulayer/gpulayer/structs"
)

const artifactHex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func artifactJob(block string) string {
	return `job "j" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "native"
      config {
        command = "/bin/true"
      }
` + block + `
    }
  }
}
`
}

// TestParseArtifact reads Nomad's artifact block, both checksum forms,
// through api and convert into structs.Task.Artifacts.
func TestParseArtifact(t *testing.T) {
	src := artifactJob(`
      artifact {
        source      = "artifact://sha256/` + artifactHex + `"
        destination = "local/data"
        mode        = "dir"
      }
      artifact {
        source      = "https://example.com/model.bin"
        destination = "local/model.bin"
        options {
          checksum = "sha256:` + artifactHex + `"
        }
      }
      artifact {
        source   = "https://example.com/b"
        checksum = "sha256:` + artifactHex + `"
      }`)
	aj, err := Parse("a.hcl", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	j := convert.JobToStructs(aj)
	if err := j.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	as := j.TaskGroups[0].Tasks[0].Artifacts
	if len(as) != 3 {
		t.Fatalf("got %d artifacts, want 3", len(as))
	}
	if as[0].GetterSource != "artifact://sha256/"+artifactHex || as[0].RelativeDest != "local/data" || as[0].GetterMode != "dir" {
		t.Errorf("artifact 1: %+v", as[0])
	}
	if as[1].GetterOptions["checksum"] != "sha256:"+artifactHex || as[1].EffectiveChecksum() != "sha256:"+artifactHex {
		t.Errorf("artifact 2 options: %+v", as[1])
	}
	if d, err := as[2].Digest(); err != nil || d != artifactHex {
		t.Errorf("artifact 3 digest %q %v", d, err)
	}
	if dest, _ := as[2].Dest(); dest != "local" {
		t.Errorf("default destination %q, want local", dest)
	}
	back := convert.JobFromStructs(j)
	if got := back.TaskGroups[0].Tasks[0].Artifacts[1].GetterSource; got != "https://example.com/model.bin" {
		t.Errorf("round trip source %q", got)
	}
}

// TestParseArtifactBad: each bad artifact block fails Validate with an
// error naming the field.
func TestParseArtifactBad(t *testing.T) {
	cases := []struct{ name, block, want string }{
		{"unknown scheme", `source = "s3://bucket/x"`, `artifact 1: source: unknown scheme "s3"`},
		{"git scheme", `source = "git::https://github.com/x/y"`, `artifact 1: source: unknown scheme`},
		{"plain http", `source = "http://example.com/x"
        checksum = "sha256:` + artifactHex + `"`, "plain http is refused"},
		{"https without checksum", `source = "https://example.com/x"`, "checksum: required for an https source"},
		{"bad checksum algo", `source = "https://example.com/x"
        checksum = "md5:abc"`, `checksum: checksum "md5:abc"`},
		{"short checksum", `source = "https://example.com/x"
        checksum = "sha256:abc"`, "64 hex digits"},
		{"bad ref digest", `source = "artifact://sha256/xyz"`, "source: \"artifact://sha256/xyz\": the digest must be 64"},
		{"checksum disagrees", `source = "artifact://sha256/` + artifactHex + `"
        checksum = "sha256:` + strings.Repeat("0", 64) + `"`, "names another digest"},
		{"dotdot destination", `source = "artifact://sha256/` + artifactHex + `"
        destination = "local/../../etc"`, `destination: "local/../../etc" must not contain ".."`},
		{"absolute destination", `source = "artifact://sha256/` + artifactHex + `"
        destination = "/etc"`, "destination: \"/etc\" must be a relative"},
		{"bad mode", `source = "artifact://sha256/` + artifactHex + `"
        mode = "any"`, `mode: must be "file" or "dir", got "any"`},
		{"unknown option", `source = "artifact://sha256/` + artifactHex + `"
        options {
          depth = "1"
        }`, `options: unknown option "depth"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			aj, err := Parse("a.hcl", []byte(artifactJob("      artifact {\n        "+c.block+"\n      }")), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = convert.JobToStructs(aj).Validate()
			if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an ErrInvalid naming %q", err, c.want)
			}
			if !strings.Contains(err.Error(), `task "t": artifact 1`) {
				t.Errorf("error %q does not name the task and block", err)
			}
		})
	}
	t.Run("too many", func(t *testing.T) {
		var b strings.Builder
		for i := 0; i <= structs.MaxTaskArtifacts; i++ {
			b.WriteString("      artifact {\n        source = \"artifact://sha256/" + artifactHex + "\"\n      }\n")
		}
		aj, err := Parse("a.hcl", []byte(artifactJob(b.String())), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := convert.JobToStructs(aj).Validate(); err == nil || !strings.Contains(err.Error(), "at most 64 artifact blocks") {
			t.Fatalf("got %v", err)
		}
	})
}
