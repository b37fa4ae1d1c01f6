package artifacts

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/structs"
)

// MaxLogArchiveBytes bounds one allocation's log archive: 1 GiB (the
// rotation keeps a task's logs far below this by default).
const MaxLogArchiveBytes = 1 << 30

// PackLogs writes a deterministic tar of the log files of tasks, read
// beneath allocDir (allocdir checks: no symlink, hard link or FIFO a task
// planted is read), to w: entries "<task>/<file>" in sorted order, mtime
// 0, uid and gid 0, mode 0644. It returns how many files it packed.
func PackLogs(allocDir string, tasks []string, w io.Writer) (int, error) {
	tw := tar.NewWriter(w)
	n := 0
	var total int64
	for _, task := range tasks {
		root, err := allocdir.OpenRoot(allocDir, task+"/logs")
		if err != nil {
			continue
		}
		names, err := allocdir.Names(root)
		if err != nil {
			root.Close()
			return n, err
		}
		for _, name := range names {
			f, err := allocdir.OpenRead(root, name)
			if err != nil {
				continue
			}
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				continue
			}
			if total+fi.Size() > MaxLogArchiveBytes {
				f.Close()
				root.Close()
				return n, fmt.Errorf("%w: logs are over %d bytes", ErrTooLarge, MaxLogArchiveBytes)
			}
			hdr := &tar.Header{Name: task + "/" + name, Mode: 0o644, Size: fi.Size(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
			hdr.ModTime = time.Unix(0, 0)
			if err := tw.WriteHeader(hdr); err != nil {
				f.Close()
				root.Close()
				return n, err
			}
			// A file still growing is cut at the size in its header.
			if _, err := io.CopyN(tw, f, fi.Size()); err != nil {
				f.Close()
				root.Close()
				return n, fmt.Errorf("pack %s/%s: %w", task, name, err)
			}
			f.Close()
			total += fi.Size()
			n++
		}
		root.Close()
	}
	return n, tw.Close()
}

// ArchiveLogs packs the tasks' logs into a temporary file in tmpDir,
// uploads it to the store unless the store has it, and returns its hex
// digest; "" when there was no log file.
func ArchiveLogs(ctx context.Context, store Store, allocDir string, tasks []string, tmpDir, jobID, allocID string) (string, error) {
	if store == nil {
		return "", ErrNoStore
	}
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(tmpDir, ".logs-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	n, err := PackLogs(allocDir, tasks, io.MultiWriter(tmp, h))
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", nil
	}
	digest := hex.EncodeToString(h.Sum(nil))
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", err
	}
	missing, err := store.Missing(ctx, []string{digest})
	if err != nil {
		return "", err
	}
	if len(missing) == 0 {
		return digest, nil
	}
	err = retryPut(ctx, func() error {
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return store.Put(ctx, digest, io.LimitReader(tmp, size), size, structs.MediaTypeLogArchive, jobID, allocID)
	})
	if err != nil {
		return "", fmt.Errorf("upload the log archive: %w", err)
	}
	return digest, nil
}

// ReadLogFromArchive copies the bytes of the entry "<task>/<file>" of a
// log archive read from r to w and returns how many. It returns an error
// wrapping ErrNotFound when the archive has no such entry.
func ReadLogFromArchive(r io.Reader, task, file string, w io.Writer) (int64, error) {
	tr := tar.NewReader(r)
	want := task + "/" + file
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return 0, fmt.Errorf("%w: %s is not in the log archive", ErrNotFound, want)
		}
		if err != nil {
			return 0, err
		}
		if h.Name == want && h.Typeflag == tar.TypeReg {
			return io.Copy(w, tr)
		}
	}
}
