package endpoint

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchRoleEnv names the role a re-executed test binary plays for
// BenchmarkRouterAddedLatency: "members" or "router".
const benchRoleEnv = "ENDPOINT_BENCH_ROLE"

// TestMain runs the benchmark's child processes: with benchRoleEnv set
// the binary serves its role, prints "ADDR <address(es)>" and exits when
// its stdin closes.
func TestMain(m *testing.M) {
	if role := os.Getenv(benchRoleEnv); role != "" {
		os.Exit(runBenchChild(role, os.Getenv("ENDPOINT_BENCH_MEMBERS")))
	}
	os.Exit(m.Run())
}

func runBenchChild(role, members string) int {
	var addr string
	var stop func()
	switch role {
	case "members":
		addrs, s, err := startBenchMembers(3)
		if err != nil {
			fmt.Fprintln(os.Stderr, "members:", err)
			return 1
		}
		addr, stop = strings.Join(addrs, ","), s
	case "router":
		if n, err := strconv.Atoi(os.Getenv("ENDPOINT_BENCH_ROUTER_GOMAXPROCS")); err == nil && n > 0 {
			runtime.GOMAXPROCS(n)
		}
		r, err := startBenchRouter(strings.Split(members, ","))
		if err != nil {
			fmt.Fprintln(os.Stderr, "router:", err)
			return 1
		}
		addr, stop = r.Addr(), func() { _ = r.Close() }
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want members or router\n", benchRoleEnv, role)
		return 2
	}
	if path := os.Getenv("ENDPOINT_BENCH_CPUPROFILE"); path != "" && role == "router" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() {
				pprof.StopCPUProfile()
				_ = f.Close()
			}()
		}
	}
	fmt.Printf("ADDR %s\n", addr)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent goes
	stop()
	return 0
}

// spawnBenchChild re-executes the test binary in role and returns the
// address(es) it serves on and its process ID; the child ends at cleanup.
func spawnBenchChild(b *testing.B, role, members string) (string, int) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchRoleEnv+"="+role, "ENDPOINT_BENCH_MEMBERS="+members)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting the %s process: %v", role, err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case s := <-line:
		addr, ok := strings.CutPrefix(strings.TrimSpace(s), "ADDR ")
		if !ok {
			b.Fatalf("%s process said %q, want ADDR <address>", role, s)
		}
		return addr, cmd.Process.Pid
	case <-time.After(30 * time.Second):
		b.Fatalf("%s process did not report its address within 30s", role)
	}
	return "", 0
}

// procCPU returns the CPU time (user and system) process pid used so far,
// from /proc/<pid>/stat, or -1 where that cannot be read.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return -1
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}
