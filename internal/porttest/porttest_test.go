package porttest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestTakeNeverRepeatsAndSkipsBusyPorts hands out more than a block's worth
// of ports: none twice, none the kernel's ephemeral range could give out,
// and one that something already listens on is skipped.
func TestTakeNeverRepeatsAndSkipsBusyPorts(t *testing.T) {
	first := Take(t)
	busy, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first+1)))
	if err != nil {
		t.Skipf("port %d taken by something else: %v", first+1, err)
	}
	defer busy.Close()

	seen := map[int]bool{first: true}
	for range 2 * BlockSize {
		p := Take(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		if p == first+1 {
			t.Fatalf("port %d handed out while something listens on it", p)
		}
		if p < lowPort || p >= min(ephemeralLow(), dynamicLow) {
			t.Fatalf("port %d outside [%d, %d)", p, lowPort, min(ephemeralLow(), dynamicLow))
		}
		if (p-lowPort)%BlockSize == 0 {
			t.Fatalf("port %d is a block's lock port", p)
		}
		seen[p] = true
	}
	if len(locks) < 2 {
		t.Fatalf("%d blocks locked after %d ports, want at least 2", len(locks), 2*BlockSize+1)
	}
}

// TestTwoProcessesGetDisjointPorts runs this test binary again as a second
// process that takes ports while this one holds its own: the two sets must
// not meet (the failure this package exists for was a port given to two
// `go test` packages at once).
func TestTwoProcessesGetDisjointPorts(t *testing.T) {
	if b := os.Getenv("PORTTEST_CHILD_BLOCK"); b != "" {
		// Start where the parent's block is, so only its lock keeps the
		// child out of it.
		start, _ := strconv.Atoi(b)
		firstBlock = func(int) int { return start }
		w := bufio.NewWriter(os.Stdout)
		for range 50 {
			w.WriteString(strconv.Itoa(Take(t)) + "\n")
		}
		w.Flush()
		return
	}
	mine := map[int]bool{}
	for range 50 {
		mine[Take(t)] = true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTwoProcessesGetDisjointPorts$", "-test.count=1")
	parentBlock := (locks[0].Addr().(*net.TCPAddr).Port - lowPort) / BlockSize
	cmd.Env = append(os.Environ(), "PORTTEST_CHILD_BLOCK="+strconv.Itoa(parentBlock))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		p, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			continue // the test framework's own lines
		}
		n++
		if mine[p] {
			t.Fatalf("port %d given to both processes", p)
		}
	}
	if n != 50 {
		t.Fatalf("child printed %d ports, want 50:\n%s", n, out)
	}
}
