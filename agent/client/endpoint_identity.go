package client

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/structs"
)

// maxBinaryHashBytes bounds what is read of a native member's command to
// hash it (2 GiB): a larger file gives no identity, and the member is not
// admitted, rather than the client reading without end.
const maxBinaryHashBytes int64 = 2 << 30

// errNoIdentity is wrapped by the errors of endpointIdentity.
var errNoIdentity = errors.New("no member identity")

// memberTask is what endpointIdentity needs of one task of a member: its
// declaration in the job and the driver's view of it while it runs.
type memberTask struct {
	task   *structs.Task
	status *driver.TaskStatus
}

// endpointIdentity computes an endpoint member's structs.EndpointIdentity:
//
//   - JobVersion is the allocation's job version (Job.Version).
//   - ArtifactDigest is, for a group of one task, the digest of what runs:
//     docker, the container's resolved image ID as the daemon reports it
//     ("sha256:<hex>"); native, the hex SHA-256 of the command's file at
//     the path the driver resolved (read through the allocation directory's
//     os.Root when the file lies beneath it, at most maxBinaryHashBytes).
//     For a group of several tasks it is the hex SHA-256 of the lines
//     "<task>\x00<digest>\n" in task name order.
//   - ConfigDigest is the hex SHA-256 of the JSON encoding of the list, in
//     task name order, of {"Name", "Driver", "Config", "Env"} per task:
//     the task's name and driver, its driver config block as the job holds
//     it (so "command", "args", "image" and every other key) and the Env
//     the job declares (not the runtime variables, which differ between
//     members). encoding/json writes map keys sorted, so equal configs give
//     equal bytes.
//
// Errors wrap errNoIdentity and say which task lacks what: a task not
// running, a driver that reports no artifact, an unreadable binary.
func endpointIdentity(a *structs.Allocation, allocDir string, tasks []memberTask, digests *fileDigestCache) (structs.EndpointIdentity, error) {
	id := structs.EndpointIdentity{}
	if a.Job != nil {
		id.JobVersion = a.Job.Version
	}
	if len(tasks) == 0 {
		return id, fmt.Errorf("%w: the group has no tasks", errNoIdentity)
	}
	sorted := append([]memberTask(nil), tasks...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].task.Name < sorted[j].task.Name })
	type configRecord struct {
		Name   string
		Driver string
		Config map[string]interface{}
		Env    map[string]string
	}
	records := make([]configRecord, 0, len(sorted))
	artifacts := make([]string, 0, len(sorted))
	for _, mt := range sorted {
		t := mt.task
		records = append(records, configRecord{Name: t.Name, Driver: t.Driver, Config: t.Config, Env: t.Env})
		d, err := artifactDigest(t, mt.status, allocDir, digests)
		if err != nil {
			return id, err
		}
		artifacts = append(artifacts, d)
	}
	cfg, err := json.Marshal(records)
	if err != nil {
		return id, fmt.Errorf("%w: encode the task config: %v", errNoIdentity, err)
	}
	sum := sha256.Sum256(cfg)
	id.ConfigDigest = hex.EncodeToString(sum[:])
	if len(artifacts) == 1 {
		id.ArtifactDigest = artifacts[0]
		return id, nil
	}
	h := sha256.New()
	for i, mt := range sorted {
		fmt.Fprintf(h, "%s\x00%s\n", mt.task.Name, artifacts[i])
	}
	id.ArtifactDigest = hex.EncodeToString(h.Sum(nil))
	return id, nil
}

// artifactDigest is the digest of what runs for one task (see
// endpointIdentity).
func artifactDigest(t *structs.Task, st *driver.TaskStatus, allocDir string, digests *fileDigestCache) (string, error) {
	if st == nil || st.State != driver.TaskStateRunning {
		return "", fmt.Errorf("%w: task %q is not running", errNoIdentity, t.Name)
	}
	switch {
	case st.ImageID != "":
		return st.ImageID, nil
	case st.Executable != "":
		d, err := digests.digest(allocDir, st.Executable)
		if err != nil {
			return "", fmt.Errorf("%w: task %q: hash its command %s: %v", errNoIdentity, t.Name, st.Executable, err)
		}
		return d, nil
	}
	return "", fmt.Errorf("%w: the %s driver reports no image or binary for task %q", errNoIdentity, t.Driver, t.Name)
}

// fileDigestCache remembers the SHA-256 of files by path and the file's
// device, inode, size and modification time, so a binary shared by 16
// members is read once. It is safe for concurrent use.
type fileDigestCache struct {
	mu sync.Mutex
	m  map[fileKey]string
}

type fileKey struct {
	path       string
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

// maxDigestCacheEntries bounds the cache; past it, it starts afresh.
const maxDigestCacheEntries = 256

// digest returns the hex SHA-256 of the regular file at p (absolute). A
// file beneath allocDir is opened through the allocation directory's
// os.Root (allocdir.OpenRead: no symlink out, no FIFO, not one a task
// planted with another owner); any other file by path, non-blocking and
// checked to be regular on its descriptor. Files larger than
// maxBinaryHashBytes are refused.
func (c *fileDigestCache) digest(allocDir, p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	f, err := openForDigest(allocDir, p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file (mode %s)", fi.Mode())
	}
	if fi.Size() > maxBinaryHashBytes {
		return "", fmt.Errorf("%d bytes, more than the %d hashed at most", fi.Size(), maxBinaryHashBytes)
	}
	key := fileKey{path: p, size: fi.Size(), mtimeNanos: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		key.dev, key.ino = uint64(sys.Dev), uint64(sys.Ino)
	}
	if c != nil {
		c.mu.Lock()
		d, ok := c.m[key]
		c.mu.Unlock()
		if ok {
			return d, nil
		}
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxBinaryHashBytes+1))
	if err != nil {
		return "", err
	}
	if n > maxBinaryHashBytes {
		return "", fmt.Errorf("grew past the %d bytes hashed at most", maxBinaryHashBytes)
	}
	d := hex.EncodeToString(h.Sum(nil))
	if c != nil {
		c.mu.Lock()
		if c.m == nil || len(c.m) >= maxDigestCacheEntries {
			c.m = map[fileKey]string{}
		}
		c.m[key] = d
		c.mu.Unlock()
	}
	return d, nil
}

// openForDigest opens p for reading: beneath allocDir through its os.Root,
// elsewhere by path without blocking on a FIFO.
func openForDigest(allocDir, p string) (*os.File, error) {
	if allocDir != "" {
		if rel, err := allocdir.Rel(allocDir, p); err == nil {
			dir, base := path.Split(rel)
			root, err := allocdir.OpenRoot(allocDir, strings.TrimSuffix(dir, "/"))
			if err != nil {
				return nil, err
			}
			defer root.Close()
			return allocdir.OpenRead(root, base)
		}
	}
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
}

// identityOf returns the identity of an endpoint member run by ar, asking
// each task's driver what runs. A member whose tasks do not all run has no
// identity yet.
func (ar *allocRunner) identityOf(tg *structs.TaskGroup, digests *fileDigestCache) (structs.EndpointIdentity, time.Time, error) {
	ar.mu.Lock()
	trs := make(map[string]*taskRunner, len(ar.tasks))
	for n, tr := range ar.tasks {
		trs[n] = tr
	}
	ar.mu.Unlock()
	var tasks []memberTask
	var started time.Time
	for _, t := range tg.Tasks {
		tr := trs[t.Name]
		var st *driver.TaskStatus
		if tr != nil && tr.drv != nil {
			st, _ = tr.drv.InspectTask(tr.taskID())
		}
		if st != nil && st.StartedAt.After(started) {
			started = st.StartedAt
		}
		tasks = append(tasks, memberTask{task: t, status: st})
	}
	id, err := endpointIdentity(ar.alloc, ar.allocDir, tasks, digests)
	return id, started, err
}
