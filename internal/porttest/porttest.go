// Package porttest hands out ports on 127.0.0.1 to tests that must name a
// port before the thing that binds it starts: a real agent binary, a Raft
// transport, a memberlist. Asking the kernel for port 0 and closing the
// listener is not enough there: the kernel hands the same port to the next
// caller of port 0 (another test package running beside this one under
// `go test ./...`, or any outgoing connection), and the agent then fails with
// "bind: address already in use".
//
// The ports come from 10000-19999, below both the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default), so the
// kernel never hands them out on its own, and the agents' dynamic port
// range for tasks (20000-32000), in aligned blocks of BlockSize.
// A process owns a block while it holds a listener on the block's first port,
// so two test processes never share a block; within a process a port is
// handed out once. The scheme is the one Consul's sdk/freeport uses.
package porttest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// BlockSize is the number of ports in one block; the first is the lock.
const BlockSize = 200

// dynamicLow is where an agent's default dynamic port range for tasks
// starts (client { min_dynamic_port }, 20000 as Nomad's): ports handed
// out stay below it, so a task's port never takes an agent's.
const dynamicLow = 20000

// lowPort is the first port of the first block: clear of the well-known and
// registered ports most services use by default, GPUlayer's 4656-4658
// included.
const lowPort = 10000

var (
	mu      sync.Mutex
	locks   []net.Listener // one per block this process owns, never closed
	next    int            // next port to try in the current block
	end     int            // one past the current block's last port
	tried   map[int]bool   // blocks already tried by this process
	rangeHi int            // first port not usable (the ephemeral range's start)

	// firstBlock picks the block to try first among n; tests replace it.
	firstBlock = rand.IntN
)

// Take returns a port that nothing listens on now (TCP or UDP, on
// 127.0.0.1) and that no other caller of Take, in this process or another,
// gets. It fails t when no block can be locked.
func Take(t testing.TB) int {
	t.Helper()
	p, err := take()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func take() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	if rangeHi == 0 {
		rangeHi = min(ephemeralLow(), dynamicLow)
		tried = map[int]bool{}
	}
	for {
		for next < end {
			p := next
			next++
			if bindable(p) {
				return p, nil
			}
		}
		if err := lockBlock(); err != nil {
			return 0, err
		}
	}
}

// lockBlock takes a block no other process holds, starting from a random
// one so parallel processes rarely try the same block first.
func lockBlock() error {
	blocks := (rangeHi - lowPort) / BlockSize
	if blocks < 1 {
		return fmt.Errorf("porttest: no ports between %d and the ephemeral range at %d", lowPort, rangeHi)
	}
	start := firstBlock(blocks)
	for i := range blocks {
		b := (start + i) % blocks
		if tried[b] {
			continue
		}
		tried[b] = true
		first := lowPort + b*BlockSize
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first)))
		if err != nil {
			continue // another process owns it, or something else listens there
		}
		locks = append(locks, ln)
		next, end = first+1, first+BlockSize
		return nil
	}
	return fmt.Errorf("porttest: all %d blocks of %d ports between %d and %d are taken", blocks, BlockSize, lowPort, rangeHi)
}

// bindable reports whether p can be bound for TCP and UDP on 127.0.0.1 now
// (memberlist binds both on its port).
func bindable(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	_ = ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	_ = pc.Close()
	return true
}

// ephemeralLow reads the start of the kernel's ephemeral port range, with
// Linux's default when it cannot (other systems: IANA's 49152 is above it).
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return linuxDefault
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= lowPort {
		return linuxDefault
	}
	return n
}
