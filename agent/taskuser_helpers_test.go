package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// letTaskUsersIn makes dir and every directory above it, up to the
// temporary directory, searchable by other users (mode 0711), as an
// operator does for a data directory: an agent running as root runs
// native tasks as "nobody", which must reach its task directory. Test
// temporary directories are 0700. It does nothing outside the temporary
// directory or when not root.
func letTaskUsersIn(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	tmp := filepath.Clean(os.TempDir())
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Clean(dir); strings.HasPrefix(p, tmp+string(filepath.Separator)); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
}

// taskUserDir is t.TempDir() made reachable with letTaskUsersIn.
func taskUserDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	letTaskUsersIn(t, d)
	return d
}

// taskWorkDir is a temporary directory native tasks may write to when
// they run as another user (nobody): reachable, and mode 0777.
func taskWorkDir(t testing.TB) string {
	t.Helper()
	d := taskUserDir(t)
	if os.Geteuid() == 0 {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
