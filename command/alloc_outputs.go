package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// AllocOutputsCommand lists, and with DEST downloads, an allocation's
// outputs.
type AllocOutputsCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *AllocOutputsCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer alloc outputs [options] ALLOC [DEST]

  Lists the outputs of the allocation with the given ID or unique ID
  prefix: the files its tasks left in $GPULAYER_OUTPUT_DIR, uploaded when
  they ended, as "<task>/<path>" with their SHA-256 digest and size.

  With DEST, downloads each output beneath DEST (created if missing) at
  its recorded path, verifies its digest before keeping it, and refuses a
  recorded path that is absolute or has "..". An existing file is
  replaced only once the new bytes are verified.
` + generalOptions + namespaceOption)
}

// Synopsis returns a one-line description.
func (c *AllocOutputsCommand) Synopsis() string { return "List or download an allocation's outputs" }

// Run lists or downloads the outputs.
func (c *AllocOutputsCommand) Run(args []string) int {
	fset := c.Meta.flagSet("alloc outputs", true)
	c.Meta.namespaceFlag(fset)
	if err := fset.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	args = fset.Args()
	if len(args) < 1 || len(args) > 2 {
		return c.Meta.argError(fset, args, "This command takes one or two arguments: the allocation ID and a destination directory")
	}
	client, alloc, code := c.Meta.allocFromArgs(args[:1], false)
	if alloc == nil {
		return code
	}
	if len(args) == 1 {
		if c.Meta.jsonOutput {
			out := alloc.Outputs
			if out == nil {
				out = []*api.ArtifactRef{}
			}
			return c.Meta.printJSON(out)
		}
		if len(alloc.Outputs) == 0 {
			c.Meta.UI.Output(fmt.Sprintf("Allocation %q has no outputs recorded", shortID(alloc.ID)))
			return 0
		}
		c.Meta.UI.Output(formatOutputs(alloc.Outputs))
		return 0
	}
	dest := args[1]
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return c.Meta.errorf("Error creating %s: %v", dest, err)
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return c.Meta.errorf("Error opening %s: %v", dest, err)
	}
	defer root.Close()
	for _, o := range alloc.Outputs {
		if err := checkOutputPath(o.Path); err != nil {
			return c.Meta.errorf("Refusing output %q: %v", o.Path, err)
		}
		if err := downloadOutput(client, root, o); err != nil {
			return c.Meta.errorf("Error downloading %s: %v", o.Path, err)
		}
		c.Meta.UI.Output(fmt.Sprintf("%s  %s  %d bytes", o.Digest, filepath.Join(dest, filepath.FromSlash(o.Path)), o.Size))
	}
	return 0
}

// formatOutputs renders outputs as a table.
func formatOutputs(outs []*api.ArtifactRef) string {
	rows := make([][]string, 0, len(outs))
	for _, o := range outs {
		if o != nil {
			rows = append(rows, []string{o.Path, fmt.Sprint(o.Size), "artifact://sha256/" + o.Digest})
		}
	}
	return table([]string{"Path", "Size", "Ref"}, rows)
}

// checkOutputPath refuses what could leave DEST: an absolute path, an
// empty, "." or ".." element, a backslash or NUL.
func checkOutputPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return errors.New("not a relative slash-separated path")
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return errors.New(`has an empty, "." or ".." element`)
		}
	}
	return nil
}

// downloadOutput writes o beneath root through a temporary file that is
// renamed over o.Path only when its SHA-256 and size match.
func downloadOutput(client *api.Client, root *os.Root, o *api.ArtifactRef) error {
	rel := filepath.FromSlash(o.Path)
	if dir := path.Dir(o.Path); dir != "." {
		if err := root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return err
		}
	}
	rc, err := client.Allocations().OutputReader(context.Background(), o.Digest)
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp := rel + ".gpulayer-download"
	_ = root.Remove(tmp)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(rc, o.Size+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && (n != o.Size || hex.EncodeToString(h.Sum(nil)) != o.Digest) {
		err = fmt.Errorf("got %d bytes hashing to sha256:%s, want %d bytes sha256:%s", n, hex.EncodeToString(h.Sum(nil)), o.Size, o.Digest)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return err
	}
	if fi, err := root.Lstat(rel); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		_ = root.Remove(rel)
	}
	return root.Rename(tmp, rel)
}
