package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestName(t *testing.T) {
	long := strings.Repeat("a", 300)
	cases := []struct {
		id, want string
		err      error
	}{
		{"0b4f6c1e-2d3a-4e5f-8a9b-0c1d2e3f4a5b/train", "0b4f6c1e-2d3a-4e5f-8a9b-0c1d2e3f4a5b.train", nil},
		{"a/web.server", "a.web_2eserver", nil},
		{"a/x_y", "a.x_5fy", nil},
		{"a/b c", "a.b_20c", nil},
		{"../../etc", "_2e_2e._2e_2e.etc", nil},
		{"", "", ErrInvalidName},
		{"/", "", ErrInvalidName},
		{"//", "", ErrInvalidName},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			got, err := Name(tc.id)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Name(%q) error %v, want %v", tc.id, err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("Name(%q) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}
	t.Run("long IDs are cut with a hash", func(t *testing.T) {
		a, err1 := Name(long + "/x")
		b, err2 := Name(long + "/y")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if len(a) != 201 || a == b || !strings.HasPrefix(a, strings.Repeat("a", 184)+"_") {
			t.Fatalf("long names %q and %q", a, b)
		}
	})
}

// FuzzName checks that every name is a single safe path element and that
// distinct IDs get distinct names.
func FuzzName(f *testing.F) {
	for _, s := range []string{"a/b", "a.b", "/", "..", "a/../b", strings.Repeat("x/", 150)} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		na, errA := Name(a)
		nb, errB := Name(b)
		for _, n := range []struct {
			name string
			err  error
		}{{na, errA}, {nb, errB}} {
			if n.err != nil {
				continue
			}
			if n.name == "" || n.name == "." || n.name == ".." || strings.ContainsAny(n.name, "/\x00") || len(n.name) > 255 {
				t.Fatalf("unsafe name %q", n.name)
			}
		}
		if errA == nil && errB == nil && a != b && na == nb {
			t.Fatalf("IDs %q and %q share the name %q", a, b, na)
		}
	})
}

func TestParseProcCgroup(t *testing.T) {
	in := "12:pids:/user.slice\n4:memory:/process_api/abc\n2:cpu,cpuacct:/x\n1:name=systemd:/init.scope\n0::/unified/path\nbogus\n3::\n"
	got := ParseProcCgroup([]byte(in))
	want := map[string]string{"pids": "/user.slice", "memory": "/process_api/abc", "cpu": "/x", "cpuacct": "/x", "name=systemd": "/init.scope", "": "/unified/path"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: got %q, want %q", k, got[k], v)
		}
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("4:memory:/a\n0::/b\n"))
	f.Add([]byte("::\n:a:b\n1:cpu,,cpuacct:/x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for k, v := range ParseProcCgroup(b) {
			if strings.Contains(k, ",") || !strings.HasPrefix(v, "/") {
				t.Fatalf("entry %q: %q", k, v)
			}
		}
	})
}

func TestParseKey(t *testing.T) {
	cases := []struct {
		in, key string
		n       uint64
		ok      bool
		err     bool
	}{
		{"low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\n", "oom_kill", 1, true, false},
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", "oom_kill", 7, true, false},
		{"oom_kill_disable 0\nunder_oom 0\n", "oom_kill", 0, false, false},
		{"usage_usec 1500\nuser_usec 1000\n", "usage_usec", 1500, true, false},
		{"oom_kill x\n", "oom_kill", 0, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.key+"/"+tc.in, func(t *testing.T) {
			n, ok, err := parseKey([]byte(tc.in), tc.key)
			if n != tc.n || ok != tc.ok || (err != nil) != tc.err {
				t.Fatalf("parseKey = %d %v %v, want %d %v error %v", n, ok, err, tc.n, tc.ok, tc.err)
			}
		})
	}
}

func TestTaskLimits(t *testing.T) {
	cases := []struct {
		name       string
		cpu, mem   int64
		hard       bool
		mhzPerCore int64
		want       Limits
		err        string
	}{
		{"no resources", 0, 0, false, 0, Limits{}, ""},
		{"memory and shares", 500, 256, false, 0, Limits{MemoryBytes: 256 << 20, CPUShares: 500}, ""},
		{"shares at least 2", 1, 0, false, 0, Limits{CPUShares: 2}, ""},
		{"shares at most 262144", 1 << 20, 0, false, 0, Limits{CPUShares: 262144}, ""},
		{"half a core", 1000, 32, true, 2000, Limits{MemoryBytes: 32 << 20, CPUShares: 1000, CPUQuota: 50000, CPUPeriod: 100000}, ""},
		{"three cores", 7500, 0, true, 2500, Limits{CPUShares: 7500, CPUQuota: 300000, CPUPeriod: 100000}, ""},
		{"quota at least 1 ms", 2, 0, true, 3000, Limits{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000}, ""},
		{"hard limit without MHz per core", 1000, 0, true, 0, Limits{}, "MHz per core"},
		{"hard limit without CPU", 0, 64, true, 2000, Limits{}, "CPU resource"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := TaskLimits(tc.cpu, tc.mem, tc.hard, tc.mhzPerCore)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("TaskLimits = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestCPUWeight(t *testing.T) {
	// Values of runc's conversion (opencontainers/cgroups), worked by hand
	// from its formula for the fixed points and checked against it.
	cases := []struct{ shares, weight uint64 }{
		{0, 0}, {1, 1}, {2, 1}, {100, 17}, {500, 58}, {1000, 99}, {1024, 100}, {2048, 174}, {262144, 10000}, {1 << 20, 10000},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.shares), func(t *testing.T) {
			if got := CPUWeight(tc.shares); got != tc.weight {
				t.Fatalf("CPUWeight(%d) = %d, want %d", tc.shares, got, tc.weight)
			}
		})
	}
}

func TestPlainReasons(t *testing.T) {
	perm := "permission denied"
	if os.Geteuid() != 0 {
		perm = "the agent does not run as root"
	}
	cases := []struct {
		err  error
		want string
	}{
		{&os.PathError{Op: "mkdir", Path: "/x", Err: syscall.EROFS}, "read-only file system"},
		{&os.PathError{Op: "mkdir", Path: "/x", Err: syscall.EACCES}, perm},
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.EBUSY}, "holds processes"},
		{&os.PathError{Op: "stat", Path: "/x", Err: syscall.ENOENT}, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if got := plain(tc.err); !strings.Contains(got, tc.want) {
				t.Fatalf("plain(%v) = %q, want it to contain %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestDisabled(t *testing.T) {
	m := Detect(Config{Disable: true})
	if m.Mode() != ModeNone || !strings.Contains(m.Reason(), "disabled") {
		t.Fatalf("mode %s reason %q", m.Mode(), m.Reason())
	}
	if _, err := m.Create("a/b", Limits{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Create: %v, want ErrUnsupported", err)
	}
	if _, err := m.Open("a/b"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Open: %v, want ErrUnsupported", err)
	}
}

func TestV1DetectFake(t *testing.T) {
	cases := []struct {
		name    string
		markers []string
		mode    Mode
		reason  string
	}{
		{"nothing mounted", nil, ModeNone, "cgroup v1 memory hierarchy not mounted"},
		{"cpu missing", []string{"memory/memory.limit_in_bytes"}, ModeNone, "cgroup v1 cpu hierarchy not mounted"},
		{"memory and cpu", []string{"memory/memory.limit_in_bytes", "cpu/cpu.shares"}, ModeV1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range tc.markers {
				p := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m := Detect(Config{V2Root: root, V1Root: root})
			if m.Mode() != tc.mode || !strings.Contains(m.Reason(), tc.reason) {
				t.Fatalf("mode %s reason %q, want %s with %q", m.Mode(), m.Reason(), tc.mode, tc.reason)
			}
			if tc.mode == ModeV1 && (len(m.v1) != 2 || m.v1[0].Controller != "memory" || m.v1[1].Parent != filepath.Join(root, "cpu", DefaultParent)) {
				t.Fatalf("hierarchies %+v", m.v1)
			}
		})
	}
}
