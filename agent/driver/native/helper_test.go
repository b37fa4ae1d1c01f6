package native

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/agent/driver"
	"github.com/gpulayer/gpulayer/agent/driver/native/cgroups"
)

// helperEnv turns the test binary into a small task program (see
// runHelper) when set in a task's environment, the way os/exec's tests
// re-run their own binary: no tool beyond the test binary is needed.
const helperEnv = "GPULAYER_NATIVE_TEST_HELPER"

// helperAllocEnv is how many MiB the "alloc" helper allocates (default 200).
const helperAllocEnv = "GPULAYER_NATIVE_TEST_ALLOC_MIB"

func init() {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
}

// runHelper is the task program:
//   - "alloc": allocates and touches 200 MiB (or the MiB in helperAllocEnv),
//     1 MiB at a time, prints "allocated" and exits 0 (a task under a
//     smaller memory limit is OOM-killed first);
//   - "spin": keeps two threads busy for 2 seconds of wall time and prints
//     "cpu_ns=<its CPU time> wall_ns=<wall time>";
//   - "escape": starts "sleep 60" in a session of its own, prints
//     "child=<pid>" and waits for a signal.
func runHelper(mode string) int {
	switch mode {
	case "alloc":
		mib := 200
		if v, err := strconv.Atoi(os.Getenv(helperAllocEnv)); err == nil {
			mib = v
		}
		var keep [][]byte
		for i := 0; i < mib; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
		return 0
	case "spin":
		runtime.GOMAXPROCS(2)
		start := time.Now()
		end := start.Add(2 * time.Second)
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := 0
				for time.Now().Before(end) {
					n++
				}
				_ = n
			}()
		}
		wg.Wait()
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			fmt.Println("getrusage:", err)
			return 1
		}
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		fmt.Printf("cpu_ns=%d wall_ns=%d\n", cpu.Nanoseconds(), time.Since(start).Nanoseconds())
		return 0
	case "escape":
		cmd := exec.Command("/bin/sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println("start:", err)
			return 1
		}
		fmt.Printf("child=%d\n", cmd.Process.Pid)
		select {}
	}
	fmt.Println("unknown helper mode", mode)
	return 2
}

// testCgroups puts this test process's task cgroups under a parent of
// their own, apart from an agent's "gpulayer" ones; TestMain removes it.
var testCgroups = cgroups.Config{Parent: fmt.Sprintf("gpulayer-test-native-%d", os.Getpid())}

// newTestDriver returns a driver on testCgroups (or cc, when given) that
// runs tasks as the test's own user (its policy's default user), and,
// when the test ends, stops and destroys every task it still knows, so
// no process or cgroup outlives the test.
func newTestDriver(t *testing.T, cc ...cgroups.Config) *Driver {
	t.Helper()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return newPolicyTestDriver(t, UserPolicy{DefaultUser: me.Username}, cc...)
}

// newPolicyTestDriver is newTestDriver with the user policy p.
func newPolicyTestDriver(t *testing.T, p UserPolicy, cc ...cgroups.Config) *Driver {
	t.Helper()
	c := testCgroups
	if len(cc) > 0 {
		c = cc[0]
	}
	d := NewWithConfig(Config{Cgroups: c, Users: p})
	liveDrivers.Store(d, struct{}{})
	t.Cleanup(func() {
		liveDrivers.Delete(d)
		_ = d.Close() // its idle shim
		d.mu.Lock()
		var ids []string
		for id, tk := range d.tasks {
			if tk != nil {
				ids = append(ids, id)
			}
		}
		d.mu.Unlock()
		for _, id := range ids {
			if err := d.StopTask(id, time.Second, "SIGKILL"); err != nil {
				t.Errorf("cleanup: stop %s: %v", id, err)
			}
			if err := d.DestroyTask(id); err != nil && !errors.Is(err, driver.ErrTaskNotFound) {
				t.Errorf("cleanup: destroy %s: %v", id, err)
			}
		}
	})
	return d
}

// liveDrivers holds the drivers newPolicyTestDriver made whose test has
// not ended, for endTask. No test in this package runs in parallel.
var liveDrivers sync.Map // *Driver -> struct{}

// endTask stops and destroys the task id in every live driver that holds
// it. DestroyTask waits for the task's shim to exit: a shim writes the
// exit file in the task's log directory after it reports the exit, so a
// test whose directory is removed first (t.TempDir's cleanup runs before
// the driver's, which was made earlier) fails on "directory not empty".
func endTask(t *testing.T, id string) {
	liveDrivers.Range(func(k, _ any) bool {
		d := k.(*Driver)
		if _, err := d.lookup(id); err != nil {
			return true
		}
		if err := d.StopTask(id, time.Second, "SIGKILL"); err != nil && !errors.Is(err, driver.ErrTaskNotFound) {
			t.Errorf("cleanup: stop %s: %v", id, err)
		}
		if err := d.DestroyTask(id); err != nil && !errors.Is(err, driver.ErrTaskNotFound) {
			t.Errorf("cleanup: destroy %s: %v", id, err)
		}
		return true
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	// Every test destroys its tasks; a task cgroup still here is a leak.
	leaks := 0
	for _, ctrl := range []string{"memory", "cpu", "cpuacct", "unified"} {
		parent := filepath.Join(cgroups.DefaultRoot, ctrl, testCgroups.Parent)
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				leaks++
				fmt.Fprintf(os.Stderr, "leaked task cgroup %s\n", filepath.Join(parent, e.Name()))
				_ = syscall.Rmdir(filepath.Join(parent, e.Name()))
			}
		}
		if err := syscall.Rmdir(parent); err != nil {
			fmt.Fprintf(os.Stderr, "remove test parent cgroup %s: %v\n", parent, err)
		}
	}
	if leaks > 0 && code == 0 {
		code = 1
	}
	os.Exit(code)
}
