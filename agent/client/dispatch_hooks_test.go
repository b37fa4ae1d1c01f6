package client

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

// TestDispatchPayloadHookWritesBeneathLocal: the payload lands in
// local/<file> with mode 0644; a symlinked local/ that leaves the task
// directory is refused by os.Root instead of followed.
func TestDispatchPayloadHookWritesBeneathLocal(t *testing.T) {
	allocDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(allocDir, "t", "local"), 0o755); err != nil {
		t.Fatal(err)
	}
	task := &structs.Task{Name: "t", DispatchPayload: &structs.DispatchPayloadConfig{File: "in/p.json"}}
	tr := &taskRunner{task: task, alloc: &structs.Allocation{Job: &structs.Job{Payload: []byte(`{"a":1}`)}},
		cfg: taskRunnerConfig{AllocDir: allocDir}}
	if err := (dispatchPayloadHook{}).prestart(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(allocDir, "t", "local", "in", "p.json")
	b, err := os.ReadFile(p)
	if err != nil || string(b) != `{"a":1}` {
		t.Fatalf("payload %q %v", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", fi.Mode())
	}

	outside := t.TempDir()
	evil := t.TempDir()
	if err := os.MkdirAll(filepath.Join(evil, "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(evil, "t", "local")); err != nil {
		t.Fatal(err)
	}
	tr.cfg.AllocDir = evil
	if err := (dispatchPayloadHook{}).prestart(context.Background(), tr); err == nil {
		t.Fatal("wrote through a symlink leaving the task directory")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("files outside the task directory: %v", entries)
	}
}

// TestMetaEnv: job, group and task meta merge (task wins), keys are
// exported as given and upper-cased under both prefixes, unsafe characters
// become '_', and the task's own env wins.
func TestMetaEnv(t *testing.T) {
	job := &structs.Job{Meta: map[string]string{"frame": "1", "owner": "job"},
		TaskGroups: []*structs.TaskGroup{{Name: "g", Meta: map[string]string{"owner": "group"}}}}
	task := &structs.Task{Name: "t", Meta: map[string]string{"run.id": "x"}}
	env := map[string]string{}
	metaEnv(env, &structs.Allocation{Job: job, TaskGroup: "g"}, task, map[string]string{"NOMAD_META_FRAME": "mine"})
	want := map[string]string{
		"NOMAD_META_frame": "1", "GPULAYER_META_frame": "1", "GPULAYER_META_FRAME": "1",
		"NOMAD_META_owner": "group", "NOMAD_META_OWNER": "group", "GPULAYER_META_owner": "group", "GPULAYER_META_OWNER": "group",
		"NOMAD_META_run_id": "x", "NOMAD_META_RUN_ID": "x", "GPULAYER_META_run_id": "x", "GPULAYER_META_RUN_ID": "x",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if _, set := env["NOMAD_META_FRAME"]; set {
		t.Error("meta overrode the task's own env")
	}
}
