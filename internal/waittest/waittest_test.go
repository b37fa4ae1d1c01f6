package waittest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeT records a Fatalf instead of stopping the test.
type fakeT struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	panic(f)
}

// TestForReturnsOnceTrueAndFailsAtTheDeadline: a condition that becomes
// true returns; one that never does fails after the deadline (not
// before, not never), naming what was awaited and the last state.
func TestForReturnsOnceTrueAndFailsAtTheDeadline(t *testing.T) {
	n := 0
	For(t, time.Second, "third poll", func() (bool, string) { n++; return n == 3, "" })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
	ft := &fakeT{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != ft {
				t.Fatalf("recovered %v, want the fake's Fatalf", r)
			}
		}()
		NoErr(ft, 50*time.Millisecond, "never", func() (bool, error) { return false, errors.New("still 0") })
	}()
	if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("failed after %s, want about 50ms", d)
	}
	if !strings.Contains(ft.msg, "never") || !strings.Contains(ft.msg, "still 0") {
		t.Errorf("message %q lacks what and the last state", ft.msg)
	}
}
