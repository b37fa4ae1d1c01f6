package client

import (
	"os"
	"path/filepath"

	"github.com/gpulayer/gpulayer/structs"
)

// finishedLocally reports whether the runner's allocation finished on this
// client: every task is dead and its final status (complete or failed) is
// recorded. A runner that only was told to stop is not finished until its
// tasks are dead.
func (ar *allocRunner) finishedLocally() bool {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return ar.clientStatus == structs.AllocClientStatusComplete || ar.clientStatus == structs.AllocClientStatusFailed
}

// collectAlloc removes what this client keeps of an allocation that
// finished here and that the servers no longer list (their garbage
// collector removed it): its record in the state file, its task handles
// and its directory <DataDir>/allocs/<alloc-id>. The caller makes sure no
// task of it runs. Failures are logged: what is left is only disk space.
func (c *Client) collectAlloc(allocID string) {
	log := c.logger.With("alloc_id", allocID)
	if !pathElem(allocID) {
		log.Warn("not removing the directory of an allocation with an unsafe ID")
		return
	}
	if err := c.state.deleteAlloc(allocID); err != nil {
		log.Warn("forget finished allocation", "error", err)
	}
	if err := c.state.deleteHandles(allocID); err != nil {
		log.Warn("forget task handles", "error", err)
	}
	if err := c.state.deleteAllocStart(allocID); err != nil {
		log.Warn("forget allocation start", "error", err)
	}
	if err := c.state.deleteAllocDef(allocID); err != nil {
		log.Warn("forget allocation", "error", err)
	}
	dir := filepath.Join(c.cfg.DataDir, "allocs", allocID)
	// Removed beneath the allocs directory: RemoveAll unlinks symlinks
	// and hard links the tasks made, never what they point to.
	allocs, err := os.OpenRoot(filepath.Join(c.cfg.DataDir, "allocs"))
	if err == nil {
		err = allocs.RemoveAll(allocID)
		allocs.Close()
	}
	if err != nil {
		log.Warn("remove allocation directory", "dir", dir, "error", err)
		return
	}
	log.Info("allocation garbage-collected by the servers; directory removed", "dir", dir)
}
