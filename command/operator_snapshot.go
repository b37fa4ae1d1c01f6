package command

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// OperatorSnapshotSaveCommand saves the cluster's state to a file.
type OperatorSnapshotSaveCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *OperatorSnapshotSaveCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator snapshot save [options] FILE

  Saves a checksummed archive of the cluster's state, taken on the leader,
  to FILE. The file is written next to FILE first and renamed into place
  once complete, so FILE is never left half-written.
` + generalOptions + `
Snapshot Save Options:

  -stale
    Let any server archive its own state (when there is no leader).
`)
}

// Synopsis returns a one-line description.
func (c *OperatorSnapshotSaveCommand) Synopsis() string { return "Save the cluster state to a file" }

// Run saves the snapshot.
func (c *OperatorSnapshotSaveCommand) Run(args []string) int {
	fs := c.Meta.flagSet("operator snapshot save", false)
	var stale bool
	fs.BoolVar(&stale, "stale", false, "")
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the file to write")
	}
	path := fs.Arg(0)
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	rc, err := client.Operator().SnapshotSave(&api.QueryOptions{AllowStale: stale})
	if err != nil {
		return c.Meta.errorf("Error saving snapshot: %v", err)
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return c.Meta.errorf("Error creating %s: %v", path, err)
	}
	n, err := io.Copy(tmp, rc)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return c.Meta.errorf("Error writing snapshot to %s: %v", path, err)
	}
	c.Meta.UI.Output(fmt.Sprintf("Saved snapshot to %s (%d bytes)", path, n))
	return 0
}

// OperatorSnapshotRestoreCommand replaces the cluster's state with a
// saved archive.
type OperatorSnapshotRestoreCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *OperatorSnapshotRestoreCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer operator snapshot restore [options] FILE

  Replaces the cluster's state with the archive in FILE (from "operator
  snapshot save"). The servers check the archive's checksum first and
  change nothing when it does not match.
` + generalOptions)
}

// Synopsis returns a one-line description.
func (c *OperatorSnapshotRestoreCommand) Synopsis() string {
	return "Restore the cluster state from a file"
}

// Run restores the snapshot.
func (c *OperatorSnapshotRestoreCommand) Run(args []string) int {
	fs := c.Meta.flagSet("operator snapshot restore", false)
	if err := fs.Parse(args); err != nil {
		return cli.RunResultHelp
	}
	if fs.NArg() != 1 {
		return c.Meta.argError(fs, fs.Args(), "This command takes one argument: the snapshot file")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return c.Meta.errorf("Error opening snapshot: %v", err)
	}
	defer f.Close()
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	if err := client.Operator().SnapshotRestore(f, nil); err != nil {
		return c.Meta.errorf("Error restoring snapshot %s: %v", fs.Arg(0), err)
	}
	c.Meta.UI.Output("Restored snapshot " + fs.Arg(0))
	return 0
}
