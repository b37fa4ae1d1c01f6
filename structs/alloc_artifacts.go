package structs

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

// TaskArtifact is one input of a task (Nomad's `artifact` block): the
// client fetches GetterSource, checks it against Checksum, and writes it
// beneath the task directory at RelativeDest before the task starts.
type TaskArtifact struct {
	// GetterSource is "artifact://sha256/<64 hex>" (a blob in the
	// servers' artifact store) or an "https://" URL.
	GetterSource string
	// GetterOptions holds Nomad's `options` block; only "checksum" is
	// read ("sha256:<64 hex>"), and only when Checksum is empty.
	GetterOptions map[string]string `json:",omitempty"`
	// GetterMode is "file" (the bytes are written as one file at
	// RelativeDest) or "dir" (the bytes are a tar unpacked beneath
	// RelativeDest). Empty: bytes that are a tar (the "ustar" magic, or
	// gzip with ".tar" in the source) are unpacked, any others written
	// as a file.
	GetterMode string `json:",omitempty"`
	// RelativeDest is a slash-separated path relative to the task
	// directory, such as "local/data" (default "local/"). It must not be
	// absolute nor contain "..".
	RelativeDest string
	// Checksum is "sha256:<64 hex>": required for https sources, and
	// when given for an artifact:// source it must name the same digest.
	Checksum string `json:",omitempty"`
}

// Artifact modes and limits.
const (
	ArtifactModeFile = "file"
	ArtifactModeDir  = "dir"
	// MaxTaskArtifacts bounds the artifact blocks of one task.
	MaxTaskArtifacts = 64
	// maxArtifactSourceLen bounds a source URL, in bytes.
	maxArtifactSourceLen = 2048
	// artifactSourcePrefix starts a reference to a stored blob.
	artifactSourcePrefix = "artifact://sha256/"
)

// Copy returns a copy of the reference.
func (r *ArtifactRef) Copy() *ArtifactRef {
	if r == nil {
		return nil
	}
	n := *r
	return &n
}

// copyArtifactRefs deep-copies a list of references.
func copyArtifactRefs(rs []*ArtifactRef) []*ArtifactRef {
	if rs == nil {
		return nil
	}
	out := make([]*ArtifactRef, len(rs))
	for i, r := range rs {
		out[i] = r.Copy()
	}
	return out
}

// Copy returns a deep copy of the artifact block.
func (a *TaskArtifact) Copy() *TaskArtifact {
	if a == nil {
		return nil
	}
	n := *a
	if a.GetterOptions != nil {
		n.GetterOptions = make(map[string]string, len(a.GetterOptions))
		for k, v := range a.GetterOptions {
			n.GetterOptions[k] = v
		}
	}
	return &n
}

func copyTaskArtifacts(as []*TaskArtifact) []*TaskArtifact {
	if as == nil {
		return nil
	}
	out := make([]*TaskArtifact, len(as))
	for i, a := range as {
		out[i] = a.Copy()
	}
	return out
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidDigest reports whether s is a lower-case hex SHA-256 (64 chars).
func ValidDigest(s string) bool { return hexDigest.MatchString(s) }

// ParseChecksum reads "sha256:<64 hex>" and returns the hex digest in
// lower case. Other algorithms are refused.
func ParseChecksum(s string) (string, error) {
	algo, hex, ok := strings.Cut(s, ":")
	if !ok || algo != "sha256" {
		return "", fmt.Errorf("checksum %q: want \"sha256:<64 hex digits>\"", s)
	}
	hex = strings.ToLower(hex)
	if !ValidDigest(hex) {
		return "", fmt.Errorf("checksum %q: the digest must be 64 hex digits", s)
	}
	return hex, nil
}

// ArtifactRefHex returns the hex digest of "artifact://sha256/<hex>".
func ArtifactRefHex(s string) (string, error) {
	if !strings.HasPrefix(s, artifactSourcePrefix) {
		return "", fmt.Errorf("%q is not an artifact reference (want %s<64 hex digits>)", s, artifactSourcePrefix)
	}
	hex := strings.TrimPrefix(s, artifactSourcePrefix)
	if !ValidDigest(hex) {
		return "", fmt.Errorf("%q: the digest must be 64 lower-case hex digits", s)
	}
	return hex, nil
}

// EffectiveChecksum is Checksum, else GetterOptions["checksum"].
func (a *TaskArtifact) EffectiveChecksum() string {
	if a.Checksum != "" {
		return a.Checksum
	}
	return a.GetterOptions["checksum"]
}

// Digest returns the hex SHA-256 the fetched bytes must have: the
// reference's digest for artifact:// sources, the checksum's for https.
func (a *TaskArtifact) Digest() (string, error) {
	if strings.HasPrefix(a.GetterSource, "artifact://") {
		return ArtifactRefHex(a.GetterSource)
	}
	return ParseChecksum(a.EffectiveChecksum())
}

// Dest returns RelativeDest cleaned (default "local"), or an error when
// it is absolute or climbs out of the task directory.
func (a *TaskArtifact) Dest() (string, error) {
	d := a.RelativeDest
	if d == "" {
		d = "local"
	}
	if strings.HasPrefix(d, "/") || strings.Contains(d, "\\") {
		return "", fmt.Errorf("%q must be a relative slash-separated path beneath the task directory", a.RelativeDest)
	}
	for _, el := range strings.Split(d, "/") {
		if el == ".." {
			return "", fmt.Errorf("%q must not contain \"..\"", a.RelativeDest)
		}
	}
	c := path.Clean(d)
	if c == "." {
		return "", fmt.Errorf("%q is the task directory itself; name a directory beneath it such as \"local/\"", a.RelativeDest)
	}
	return c, nil
}

// artifactProblems lists what is wrong with a task's artifact blocks,
// each naming the field.
func artifactProblems(as []*TaskArtifact) []string {
	var out []string
	if len(as) > MaxTaskArtifacts {
		return []string{fmt.Sprintf("artifact: at most %d artifact blocks per task, got %d", MaxTaskArtifacts, len(as))}
	}
	for i, a := range as {
		where := fmt.Sprintf("artifact %d", i+1)
		if a == nil {
			out = append(out, where+": is null")
			continue
		}
		src := a.GetterSource
		if len(src) > maxArtifactSourceLen {
			out = append(out, fmt.Sprintf("%s: source: longer than %d bytes", where, maxArtifactSourceLen))
			continue
		}
		scheme, _, _ := strings.Cut(src, "://")
		switch {
		case src == "":
			out = append(out, where+": source: is required")
		case strings.HasPrefix(src, "artifact://"):
			hex, err := ArtifactRefHex(src)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: source: %v", where, err))
			} else if cs := a.EffectiveChecksum(); cs != "" {
				if want, err := ParseChecksum(cs); err != nil {
					out = append(out, fmt.Sprintf("%s: checksum: %v", where, err))
				} else if want != hex {
					out = append(out, fmt.Sprintf("%s: checksum: %q names another digest than the source", where, cs))
				}
			}
		case strings.HasPrefix(src, "https://"):
			if len(src) == len("https://") {
				out = append(out, where+": source: the URL has no host")
			}
			cs := a.EffectiveChecksum()
			if cs == "" {
				out = append(out, where+": checksum: required for an https source (\"sha256:<64 hex digits>\")")
			} else if _, err := ParseChecksum(cs); err != nil {
				out = append(out, fmt.Sprintf("%s: checksum: %v", where, err))
			}
		case strings.HasPrefix(src, "http://"):
			out = append(out, where+": source: plain http is refused; use https:// with a checksum, or artifact://sha256/<hex>")
		default:
			if !strings.Contains(src, "://") {
				scheme = "(none)"
			}
			out = append(out, fmt.Sprintf("%s: source: unknown scheme %q in %q (known: artifact://sha256/<hex>, https://)", where, scheme, src))
		}
		switch a.GetterMode {
		case "", ArtifactModeFile, ArtifactModeDir:
		default:
			out = append(out, fmt.Sprintf("%s: mode: must be %q or %q, got %q", where, ArtifactModeFile, ArtifactModeDir, a.GetterMode))
		}
		if _, err := a.Dest(); err != nil {
			out = append(out, fmt.Sprintf("%s: destination: %v", where, err))
		}
		for k := range a.GetterOptions {
			if k != "checksum" {
				out = append(out, fmt.Sprintf("%s: options: unknown option %q (known: checksum)", where, k))
			}
		}
	}
	return out
}

// MediaTypeLogArchive is the media type of an allocation's log archive
// (a tar of "<task>/<task>.<stdout|stderr>.<n>" files), so the servers
// can find it by its allocation reference once the allocation is gone.
const MediaTypeLogArchive = "application/x-gpulayer-logs+tar"

// Task events of artifacts, Nomad's names where Nomad has the event.
const (
	TaskEventDownloadingArtifacts   = "Downloading Artifacts"
	TaskEventArtifactDownloadFailed = "Failed Artifact Download"
	// TaskEventOutputsUploaded and TaskEventOutputsFailed have no Nomad
	// counterpart (Nomad has no outputs).
	TaskEventOutputsUploaded = "Outputs Uploaded"
	TaskEventOutputsFailed   = "Failed Outputs Upload"
)

// Bounds of what a client records on an allocation.
const (
	// MaxAllocOutputs bounds Allocation.Outputs.
	MaxAllocOutputs = 100_000
	// maxOutputPathLen bounds an output's Path, in bytes.
	maxOutputPathLen = 4096
)

// CheckAllocArtifacts checks the Outputs and LogArchive a client sends:
// at most MaxAllocOutputs outputs, each with a relative slash-separated
// Path without "..", a 64-hex Digest and a Size of 0 or more; LogArchive
// empty or a 64-hex digest. Errors wrap ErrInvalid and name the field.
func CheckAllocArtifacts(a *Allocation) error {
	if len(a.Outputs) > MaxAllocOutputs {
		return fmt.Errorf("%w: allocation %q: outputs: at most %d, got %d", ErrInvalid, a.ID, MaxAllocOutputs, len(a.Outputs))
	}
	for i, o := range a.Outputs {
		if o == nil {
			return fmt.Errorf("%w: allocation %q: outputs[%d]: is null", ErrInvalid, a.ID, i)
		}
		if err := CheckOutputPath(o.Path); err != nil {
			return fmt.Errorf("%w: allocation %q: outputs[%d]: path: %v", ErrInvalid, a.ID, i, err)
		}
		if !ValidDigest(o.Digest) {
			return fmt.Errorf("%w: allocation %q: outputs[%d]: digest: want 64 lower-case hex digits, got %q", ErrInvalid, a.ID, i, o.Digest)
		}
		if o.Size < 0 {
			return fmt.Errorf("%w: allocation %q: outputs[%d]: size: must not be negative", ErrInvalid, a.ID, i)
		}
	}
	if a.LogArchive != "" && !ValidDigest(a.LogArchive) {
		return fmt.Errorf("%w: allocation %q: log archive: want 64 lower-case hex digits, got %q", ErrInvalid, a.ID, a.LogArchive)
	}
	return nil
}

// CheckOutputPath refuses a recorded path that is empty, absolute, has a
// "..", "." or empty element, a backslash or a NUL, or is longer than
// 4096 bytes: a downloader joins it beneath its destination.
func CheckOutputPath(p string) error {
	if p == "" || len(p) > maxOutputPathLen {
		return fmt.Errorf("%q: must be 1 to %d bytes", p, maxOutputPathLen)
	}
	if strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return fmt.Errorf("%q: must be a relative slash-separated path", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("%q: has an empty, \".\" or \"..\" element", p)
		}
	}
	return nil
}

// ArtifactDigests returns the hex digests of the artifact:// inputs the
// job's tasks name, sorted and without repeats. The servers count them as
// the job's references to those artifacts (access and retention).
func (j *Job) ArtifactDigests() []string {
	if j == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, tg := range j.TaskGroups {
		if tg == nil {
			continue
		}
		for _, t := range tg.Tasks {
			if t == nil {
				continue
			}
			for _, a := range t.Artifacts {
				if a == nil {
					continue
				}
				if hex, err := ArtifactRefHex(a.GetterSource); err == nil && !seen[hex] {
					seen[hex] = true
					out = append(out, hex)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
