package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/nomadish/artifacttar"
)

// ArtifactCommand groups the artifact subcommands; run alone it prints
// help.
type ArtifactCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ArtifactCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer artifact <subcommand> [options]

  Content-addressed artifacts stored on the servers:
  "artifact put PATH" uploads a file or a directory and prints its
  artifact://sha256/<hex> reference; "artifact get REF [DEST]" downloads
  and verifies one; "artifact ls" lists them; "artifact inspect REF" shows
  one's metadata.
`)
}

// Synopsis returns a one-line description.
func (c *ArtifactCommand) Synopsis() string { return "Store and fetch content-addressed artifacts" }

// Run prints help; see groupRun.
func (c *ArtifactCommand) Run(args []string) int { return c.Meta.groupRun(args) }

// ArtifactPutCommand uploads a file or a directory.
type ArtifactPutCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ArtifactPutCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer artifact put [options] PATH

  Uploads the file at PATH, or the directory at PATH packed as a
  deterministic tar (sorted entries, mtime 0, uid/gid 0, modes 0644/0755;
  symlinks and special files are refused), and prints its reference,
  artifact://sha256/<hex>. The servers are asked first whether they hold
  those bytes already; then nothing is sent.
` + generalOptions + namespaceOption + `
Put Options:

  -job JOB
    Reference the artifact from job JOB (in -namespace), so retention
    keeps it while the job exists and the job's readers may read it. The
    job must exist in that namespace.
`)
}

// Synopsis returns a one-line description.
func (c *ArtifactPutCommand) Synopsis() string { return "Upload a file or directory as an artifact" }

// Run uploads PATH.
func (c *ArtifactPutCommand) Run(args []string) int {
	fs := c.Meta.flagSet("artifact put", false)
	var job string
	fs.StringVar(&job, "job", "", "")
	c.Meta.namespaceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the file or directory to upload")
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	ref, sent, err := PutArtifact(context.Background(), client, fs.Arg(0), &api.ArtifactPutOptions{Job: job, Namespace: c.Meta.namespace})
	if err != nil {
		return c.Meta.errorf("Error uploading %s: %v", fs.Arg(0), err)
	}
	if !sent {
		c.Meta.UI.Info("The servers hold these bytes already; nothing was sent.")
	}
	c.Meta.UI.Output(ref)
	return 0
}

// PutArtifact uploads the file or directory at path (see
// ArtifactPutCommand) and returns its reference and whether the bytes
// were sent (false when the servers held them). A directory is packed to
// a temporary file first, so the digest is known before the upload.
func PutArtifact(ctx context.Context, client *api.Client, path string, opts *api.ArtifactPutOptions) (string, bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false, err
	}
	src := path
	o := *opts
	o.MediaType = api.ArtifactMediaFile
	if st.IsDir() {
		o.MediaType = api.ArtifactMediaTar
		tmp, err := os.CreateTemp("", "gpulayer-artifact-*.tar")
		if err != nil {
			return "", false, err
		}
		defer os.Remove(tmp.Name())
		if err := artifacttar.Pack(path, tmp); err != nil {
			tmp.Close()
			return "", false, err
		}
		if err := tmp.Close(); err != nil {
			return "", false, err
		}
		src = tmp.Name()
	} else if !st.Mode().IsRegular() {
		return "", false, fmt.Errorf("%s is not a regular file or a directory", path)
	}
	digest, size, err := hashFile(src)
	if err != nil {
		return "", false, err
	}
	missing, err := client.Artifacts().Missing([]string{digest})
	if err != nil {
		return "", false, err
	}
	if len(missing) == 0 {
		// Stored already: claim it without the bytes. A caller who may
		// not read it yet is asked for them (400), as proof it has them.
		if _, err := client.Artifacts().Put(ctx, digest, nil, 0, &o); err == nil {
			return api.ArtifactRefPrefix + digest, false, nil
		} else if se := (*api.StatusError)(nil); !errors.As(err, &se) || se.Code != 400 {
			return "", false, err
		}
	}
	f, err := os.Open(src)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	if _, err := client.Artifacts().Put(ctx, digest, f, size, &o); err != nil {
		return "", false, err
	}
	return api.ArtifactRefPrefix + digest, true, nil
}

// hashFile returns the hex SHA-256 and size of the file at path.
func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, make([]byte, 1<<20))
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// ArtifactGetCommand downloads an artifact.
type ArtifactGetCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ArtifactGetCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer artifact get [options] REF [DEST]

  Downloads the artifact REF (artifact://sha256/<hex>, or the bare hex
  digest) to DEST (default: ./<hex>; "-" writes to standard output). The
  bytes are hashed as they arrive and written to a file next to DEST that
  is renamed into place only when the digest matches: a mismatch leaves
  nothing at DEST and exits 1. A directory artifact is saved as its tar.
` + generalOptions + namespaceOption)
}

// Synopsis returns a one-line description.
func (c *ArtifactGetCommand) Synopsis() string { return "Download and verify an artifact" }

// Run downloads REF.
func (c *ArtifactGetCommand) Run(args []string) int {
	fs := c.Meta.flagSet("artifact get", false)
	c.Meta.namespaceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one or two arguments: the artifact reference and where to write it")
	}
	digest, err := api.ParseArtifactRef(fs.Arg(0))
	if err != nil {
		return c.Meta.errorf("Error: %v", err)
	}
	dest := digest
	if fs.NArg() == 2 {
		dest = fs.Arg(1)
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	rc, err := client.Artifacts().Get(context.Background(), digest)
	if err != nil {
		return c.Meta.errorf("Error downloading %s: %v", fs.Arg(0), err)
	}
	defer rc.Close()
	if dest == "-" {
		if _, err := io.Copy(os.Stdout, rc); err != nil {
			return c.Meta.errorf("Error downloading %s: %v", fs.Arg(0), err)
		}
		return 0
	}
	n, err := writeVerified(rc, dest)
	if err != nil {
		return c.Meta.errorf("Error downloading %s: %v", fs.Arg(0), err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Wrote %s (%d bytes, sha256 %s verified)", dest, n, digest))
	return 0
}

// writeVerified copies r to a temporary file beside dest and renames it
// to dest once r ended without error (a verifying reader fails its end on
// a digest mismatch).
func writeVerified(r io.Reader, dest string) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(tmp, r, make([]byte, 1<<20))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dest)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return 0, err
	}
	return n, nil
}

// ArtifactListCommand lists artifacts.
type ArtifactListCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ArtifactListCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer artifact ls [options]

  Lists the artifacts this token may read.
` + generalOptions + namespaceOption + `
List Options:
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ArtifactListCommand) Synopsis() string { return "List artifacts" }

// Run lists the artifacts.
func (c *ArtifactListCommand) Run(args []string) int {
	fs := c.Meta.flagSet("artifact ls", true)
	c.Meta.namespaceFlag(fs)
	client, code := c.Meta.optionsOnly(fs, args)
	if client == nil {
		return code
	}
	list, err := client.Artifacts().List()
	if err != nil {
		return c.Meta.errorf("Error listing artifacts: %v", err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(list)
	}
	if len(list) == 0 {
		c.Meta.UI.Output("No artifacts")
		return 0
	}
	rows := make([][]string, 0, len(list))
	for _, a := range list {
		rows = append(rows, []string{a.Digest[:12], strconv.FormatInt(a.Size, 10), a.MediaType,
			time.Unix(0, a.CreateTime).UTC().Format(time.RFC3339), strconv.Itoa(len(a.JobRefs) + len(a.AllocRefs))})
	}
	c.Meta.UI.Output(table([]string{"Digest", "Size", "Media Type", "Created", "Refs"}, rows))
	return 0
}

// ArtifactInspectCommand shows an artifact's metadata.
type ArtifactInspectCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *ArtifactInspectCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer artifact inspect [options] REF

  Shows the metadata of artifact REF: size, media type, when it was
  uploaded and by whom, and the jobs and allocations that reference it.
` + generalOptions + namespaceOption + `
Inspect Options:
` + jsonOption)
}

// Synopsis returns a one-line description.
func (c *ArtifactInspectCommand) Synopsis() string { return "Show an artifact's metadata" }

// Run shows REF's metadata.
func (c *ArtifactInspectCommand) Run(args []string) int {
	fs := c.Meta.flagSet("artifact inspect", true)
	c.Meta.namespaceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the artifact reference")
	}
	digest, err := api.ParseArtifactRef(fs.Arg(0))
	if err != nil {
		return c.Meta.errorf("Error: %v", err)
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	a, err := client.Artifacts().Info(digest)
	if err != nil {
		return c.Meta.errorf("Error reading artifact %s: %v", fs.Arg(0), err)
	}
	if c.Meta.jsonOutput {
		return c.Meta.printJSON(a)
	}
	c.Meta.UI.Output(kv([][2]string{
		{"Reference", api.ArtifactRefPrefix + a.Digest},
		{"Size", strconv.FormatInt(a.Size, 10)},
		{"Media Type", a.MediaType},
		{"Created", time.Unix(0, a.CreateTime).UTC().Format(time.RFC3339)},
		{"Uploaded By", a.UploadedBy},
		{"Jobs", strings.Join(a.JobRefs, ",")},
		{"Allocations", strings.Join(a.AllocRefs, ",")},
	}))
	return 0
}
