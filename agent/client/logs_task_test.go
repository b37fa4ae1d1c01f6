package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/clienttest"
	"github.com/gpulayer/gpulayer/agent/driver/docker/dockertest"
	"github.com/gpulayer/gpulayer/structs"
)

// TestTaskLogsRotateAndFollow is issue 5's "must show 3": a task prints
// 10,000 JSON lines of 1 KiB with a 1 MiB rotation limit. Every rotated
// file parses line by line, their concatenation is exactly what was
// printed, and a follower started before the first rotation sees every
// line. It runs for the native driver (the shim writes the files) and the
// docker driver (the client writes what the daemon streams).
func TestTaskLogsRotateAndFollow(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 10 MiB of logs per driver")
	}
	const lines, size = 10000, 1024
	var want strings.Builder
	for i := 0; i < lines; i++ {
		want.WriteString(dockertest.ProgLine(i, size))
	}
	cases := []struct {
		name  string
		alloc func(nodeID string) *structs.Allocation
	}{
		{"native", func(nodeID string) *structs.Allocation {
			return clienttest.NativeAlloc(nodeID, structs.JobTypeBatch, dockertest.Prog(t), []string{"lines", "10000", "1024", "../go"}, nil)
		}},
		{"docker", func(nodeID string) *structs.Allocation {
			image := dockertest.BuildImage(t)
			a := clienttest.NativeAlloc(nodeID, structs.JobTypeBatch, "", nil, nil)
			task := a.Job.TaskGroups[0].Tasks[0]
			task.Driver = "docker"
			task.Config = map[string]interface{}{"image": image, "args": []interface{}{"lines", "10000", "1024", "/alloc/go"}}
			return a
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := clienttest.NewServer()
			c := newTestClient(t, srv, "", func(cfg *Config) {
				cfg.LogMaxFileSizeMB = 1
				cfg.LogMaxFiles = 50 // nothing is pruned
			})
			a := tc.alloc(c.Node().ID)
			srv.UpsertAlloc(a)
			srv.WaitForAlloc(t, a.ID, 30*time.Second, running)

			// The follower starts before the task prints its first line.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r, err := c.AllocLogs(ctx, a.ID, "main", "stdout", true)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			followed := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(r)
				followed <- b
			}()
			logDir := filepath.Join(c.cfg.DataDir, "allocs", a.ID, "main", "logs")
			if idx, _ := logIndexes(logDir, "main.stdout"); len(idx) > 1 {
				t.Fatalf("rotated before the task started printing: %v", idx)
			}
			if err := os.WriteFile(filepath.Join(c.cfg.DataDir, "allocs", a.ID, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			got := srv.WaitForAlloc(t, a.ID, 60*time.Second, terminal)
			if got.ClientStatus != structs.AllocClientStatusComplete {
				t.Fatalf("alloc %s: %+v", got.ClientStatus, got.TaskStates["main"])
			}

			var fb []byte
			select {
			case fb = <-followed:
			case <-ctx.Done():
				t.Fatal("follower did not end after the task died")
			}
			if !bytes.Equal(fb, []byte(want.String())) {
				t.Fatalf("follower saw %d bytes (%d lines), want %d bytes (%d lines)", len(fb), bytes.Count(fb, []byte("\n")), want.Len(), lines)
			}

			idx, err := logIndexes(logDir, "main.stdout")
			if err != nil {
				t.Fatal(err)
			}
			if len(idx) < 9 {
				t.Fatalf("%d log files, want about 10 for 10 MiB at 1 MiB each", len(idx))
			}
			var all bytes.Buffer
			next := 0
			for _, i := range idx {
				b, err := os.ReadFile(filepath.Join(logDir, fmt.Sprintf("main.stdout.%d", i)))
				if err != nil {
					t.Fatal(err)
				}
				if len(b) > 1<<20+size {
					t.Fatalf("file %d holds %d bytes, over the limit plus one line", i, len(b))
				}
				sc := bufio.NewScanner(bytes.NewReader(b))
				sc.Buffer(make([]byte, 4096), 4096)
				for sc.Scan() {
					var v struct {
						I int `json:"i"`
					}
					if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
						t.Fatalf("file %d: line does not parse: %v: %.60q", i, err, sc.Text())
					}
					if v.I != next {
						t.Fatalf("file %d: line %d, want %d", i, v.I, next)
					}
					next++
				}
				if err := sc.Err(); err != nil {
					t.Fatalf("file %d: %v", i, err)
				}
				all.Write(b)
			}
			if all.String() != want.String() {
				t.Fatalf("concatenated files: %d bytes, want %d", all.Len(), want.Len())
			}
		})
	}
}
