package client

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gpulayer/gpulayer/agent/driver/allocdir"
	"github.com/gpulayer/gpulayer/structs"
)

// dispatchPayloadHook is the task's prestart hook that writes a dispatched
// job's payload to local/<dispatch_payload.file> (Nomad's
// dispatch_payload block), opened beneath the task directory with
// os.Root, mode 0644 so a task running as another user reads it. A task
// without the block, or a job without a payload, gets no file.
type dispatchPayloadHook struct{}

func (dispatchPayloadHook) name() string         { return "dispatch_payload" }
func (dispatchPayloadHook) failureEvent() string { return structs.TaskEventSetupFailure }

func (dispatchPayloadHook) prestart(_ context.Context, tr *taskRunner) error {
	dp := tr.task.DispatchPayload
	job := tr.alloc.Job
	if dp == nil || job == nil || len(job.Payload) == 0 {
		return nil
	}
	rel := path.Join("local", dp.File)
	if !strings.HasPrefix(rel, "local/") {
		return fmt.Errorf("dispatch_payload: file %q is not inside local/", dp.File)
	}
	root, err := allocdir.OpenRoot(tr.cfg.AllocDir, tr.task.Name)
	if err != nil {
		return fmt.Errorf("dispatch_payload: %w", err)
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.FromSlash(path.Dir(rel)), 0o755); err != nil {
		return fmt.Errorf("dispatch_payload: create %s: %w", path.Dir(rel), err)
	}
	if err := allocdir.WriteFile(root, filepath.FromSlash(rel), job.Payload, 0o644, false); err != nil {
		return fmt.Errorf("dispatch_payload: write %s: %w", rel, err)
	}
	return nil
}

// envNameUnsafe matches what may not stand in an environment variable's
// name.
var envNameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_]`)

// metaEnv adds the task's meta (the job's, overridden by the group's,
// overridden by the task's; a dispatched job's meta included) as
// NOMAD_META_<key> and GPULAYER_META_<key>, each also with the key
// upper-cased, as Nomad does; characters not allowed in a variable name
// become '_'. A variable the task's env sets already is left alone.
func metaEnv(env map[string]string, alloc *structs.Allocation, task *structs.Task, userEnv map[string]string) {
	meta := map[string]string{}
	if j := alloc.Job; j != nil {
		for k, v := range j.Meta {
			meta[k] = v
		}
		if tg := j.LookupTaskGroup(alloc.TaskGroup); tg != nil {
			for k, v := range tg.Meta {
				meta[k] = v
			}
		}
	}
	for k, v := range task.Meta {
		meta[k] = v
	}
	for k, v := range meta {
		key := envNameUnsafe.ReplaceAllString(k, "_")
		for _, prefix := range []string{"NOMAD_META_", "GPULAYER_META_"} {
			for _, name := range []string{prefix + key, prefix + strings.ToUpper(key)} {
				if _, set := userEnv[name]; !set {
					env[name] = v
				}
			}
		}
	}
}
