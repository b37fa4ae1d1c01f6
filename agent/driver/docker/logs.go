package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
)

// sinceSaveInterval is how often the log position is saved while a
// container writes without pause (it is saved at once whenever the copy
// catches up). After a client restart, lines copied after the last save
// are copied again: output is never lost, and only what a fast writer
// wrote in this interval before the client died may appear twice.
const sinceSaveInterval = 250 * time.Millisecond

// sincePath is the file under the task's log directory holding the
// timestamp of the last log entry copied (RFC 3339 with nanoseconds).
func sincePath(cfg *driver.TaskConfig) string {
	if cfg == nil || cfg.LogDir == "" {
		return ""
	}
	return filepath.Join(cfg.LogDir, "."+cfg.Name+".docker-since")
}

// maxSinceFile bounds the log position file, in bytes.
const maxSinceFile = 256

// readSince returns the saved log position, or "" when there is none or
// the file is refused: it is read beneath the allocation directory, which
// the container can write (package allocdir).
func readSince(cfg *driver.TaskConfig) string {
	p := sincePath(cfg)
	if p == "" {
		return ""
	}
	root, err := allocdir.OpenBeneath(cfg.AllocDir(), cfg.LogDir)
	if err != nil {
		return ""
	}
	defer root.Close()
	b, err := allocdir.ReadFile(root, filepath.Base(p), maxSinceFile)
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// writeSince saves the log position l through a fresh file and a rename
// beneath the allocation directory: a symlink the container planted under
// the name is replaced, never followed.
func writeSince(cfg *driver.TaskConfig, l string) error {
	root, err := allocdir.OpenBeneath(cfg.AllocDir(), cfg.LogDir)
	if err != nil {
		return err
	}
	defer root.Close()
	return allocdir.WriteFile(root, filepath.Base(sincePath(cfg)), []byte(l), 0o600, false)
}

// streamLogs copies the container's stdout and stderr to the task's
// writers until the container exits, reading the daemon's multiplexed
// stream with timestamps so that a restarted client resumes after the
// last entry it copied (entries at or before since are skipped).
func (d *Driver) streamLogs(t *task, cfg *driver.TaskConfig, since string) {
	stdout, stderr := writerOrDiscard(cfg.Stdout), writerOrDiscard(cfg.Stderr)
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Timestamps: true}
	var sinceT time.Time
	if since != "" {
		if ts, err := time.Parse(time.RFC3339Nano, since); err == nil {
			sinceT = ts
			// The API's since has second precision in older daemons: ask
			// from the second before and skip what was copied.
			opts.Since = fmt.Sprintf("%d", ts.Unix()-1)
		}
	}
	rc, err := d.api.ContainerLogs(context.Background(), t.containerID, opts)
	if err != nil {
		d.logger.Warn("container logs unavailable", "task_id", t.id, "error", err)
		return
	}
	defer rc.Close()
	sp := sincePath(cfg)
	var mu, saveMu sync.Mutex
	last := ""
	saved := ""
	save := func() {
		saveMu.Lock()
		defer saveMu.Unlock()
		mu.Lock()
		l := last
		mu.Unlock()
		if sp != "" && l != "" && l != saved {
			if err := writeSince(cfg, l); err != nil {
				d.logger.Warn("save log position", "task_id", t.id, "error", err)
			}
			saved = l
		}
	}
	stop := make(chan struct{})
	saverDone := make(chan struct{})
	go func() {
		defer close(saverDone)
		tick := time.NewTicker(sinceSaveInterval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				save()
			}
		}
	}()
	br := bufio.NewReaderSize(rc, 64<<10)
	err = demuxTimestamped(br, func(stream byte, ts string, line []byte) error {
		if !sinceT.IsZero() {
			if at, err := time.Parse(time.RFC3339Nano, ts); err == nil && !at.After(sinceT) {
				return nil
			}
		}
		w := stdout
		if stream == byte(stdcopy.Stderr) {
			w = stderr
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		mu.Lock()
		last = ts
		mu.Unlock()
		if br.Buffered() == 0 {
			// Nothing more to copy now: save the position at once, so
			// a task that writes now and then is never copied twice.
			save()
		}
		return nil
	})
	close(stop)
	<-saverDone
	save()
	if !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		d.logger.Warn("container log stream ended", "task_id", t.id, "error", err)
	}
}

// maxLogFrame bounds one frame of the log stream, in bytes. The daemon
// splits lines into frames of at most 16 KiB (plus the timestamp).
const maxLogFrame = 1 << 20

// demuxTimestamped reads the Engine API's multiplexed log stream: frames
// of an 8-byte header (stream byte, 3 zero bytes, big-endian uint32 size)
// and a payload, as documented for GET /containers/{id}/logs. With
// timestamps each payload starts with an RFC 3339 timestamp and a space.
// It calls fn per frame and returns io.EOF at the end of the stream, an
// error for a truncated frame or one over maxLogFrame.
func demuxTimestamped(r io.Reader, fn func(stream byte, ts string, line []byte) error) error {
	var hdr [8]byte
	buf := make([]byte, 32<<10)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("log stream: truncated frame header: %w", err)
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[4:]))
		if n > maxLogFrame {
			return fmt.Errorf("log stream: frame of %d bytes exceeds %d", n, maxLogFrame)
		}
		if n > len(buf) {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return fmt.Errorf("log stream: truncated frame: %w", err)
		}
		p := buf[:n]
		ts := ""
		if i := bytes.IndexByte(p, ' '); i > 0 && i < 40 {
			ts, p = string(p[:i]), p[i+1:]
		}
		if hdr[0] != byte(stdcopy.Stdout) && hdr[0] != byte(stdcopy.Stderr) {
			continue
		}
		if err := fn(hdr[0], ts, p); err != nil {
			return err
		}
	}
}

func writerOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// ExecTask runs opts.Cmd inside the running container (its namespaces,
// environment and working directory) and returns its exit code. With
// opts.Tty the command gets a terminal and its output is one stream, sent
// to opts.Stdout. It returns driver.ErrTaskNotFound for an unknown or
// exited task and driver.ErrInvalidConfig (wrapped) for an empty command.
func (d *Driver) ExecTask(ctx context.Context, taskID string, opts *driver.ExecOptions) (int, error) {
	t, err := d.lookup(taskID)
	if err != nil {
		return -1, err
	}
	select {
	case <-t.done:
		return -1, fmt.Errorf("%w: task %s has exited", driver.ErrTaskNotFound, taskID)
	default:
	}
	if opts == nil || len(opts.Cmd) == 0 || opts.Cmd[0] == "" {
		return -1, fmt.Errorf("%w: exec needs a command", driver.ErrInvalidConfig)
	}
	ex, err := d.api.ExecCreate(ctx, t.containerID, client.ExecCreateOptions{
		Cmd: opts.Cmd, TTY: opts.Tty, AttachStdin: opts.Stdin != nil, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", shortID(t.containerID), err)
	}
	att, err := d.api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: opts.Tty})
	if err != nil {
		return -1, fmt.Errorf("attach to exec in container %s: %w", shortID(t.containerID), err)
	}
	defer att.Close()
	if opts.Stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, opts.Stdin)
			_ = att.CloseWrite()
		}()
	}
	if opts.Tty {
		_, err = io.Copy(writerOrDiscard(opts.Stdout), att.Reader)
	} else {
		_, err = stdcopy.StdCopy(writerOrDiscard(opts.Stdout), writerOrDiscard(opts.Stderr), att.Reader)
	}
	if err != nil && ctx.Err() != nil {
		return -1, ctx.Err()
	}
	ins, err := d.api.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return -1, fmt.Errorf("inspect exec: %w", err)
	}
	return ins.ExitCode, nil
}
