// Package dockertest builds the docker driver tests' image: a FROM scratch
// image holding one static Go program (testdata/prog), built locally so no
// registry is needed.
package dockertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Image is the tag of the test image.
const Image = "gpulayer-test-prog:latest"

var (
	buildOnce sync.Once
	buildErr  string

	progOnce sync.Once
	progPath string
	progErr  string
)

// Prog builds testdata/prog once per test binary as a static executable
// and returns its path (for native driver tests; no Docker needed).
func Prog(t testing.TB) string {
	t.Helper()
	progOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpulayer-prog-bin")
		if err != nil {
			progErr = err.Error()
			return
		}
		progPath = filepath.Join(dir, "prog")
		if err := buildProg(progPath); err != "" {
			progErr = err
		}
	})
	if progErr != "" {
		t.Fatalf("build test program: %s", progErr)
	}
	return progPath
}

// ProgLine is line i of the program's "lines N size" output, newline
// included: {"i":<i>,"pad":"xxx…"} padded to size bytes.
func ProgLine(i, size int) string {
	head := fmt.Sprintf(`{"i":%d,"pad":"`, i)
	return head + strings.Repeat("x", max(size-len(head)-3, 0)) + "\"}\n"
}

func buildProg(out string) string {
	_, file, _, _ := runtime.Caller(0)
	build := exec.Command("go", "build", "-o", out, ".")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "testdata", "prog")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return "go build testdata/prog: " + err.Error() + ": " + string(b)
	}
	return ""
}

// Require skips the test when Docker is not usable here, or fails it when
// the CI environment variable is "true" (CI must run the Docker tests).
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		missing(t, "the docker command is not installed")
		return
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		missing(t, "the Docker daemon does not answer: "+string(out))
	}
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("Docker is required in CI: %s", why)
	}
	t.Skipf("skipping: %s", why)
}

// BuildImage builds Image once per test binary (CGO_ENABLED=0 go build of
// testdata/prog, then docker build FROM scratch) and returns its tag. It
// calls Require first.
func BuildImage(t testing.TB) string {
	t.Helper()
	Require(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpulayer-prog")
		if err != nil {
			buildErr = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		if buildErr = buildProg(filepath.Join(dir, "prog")); buildErr != "" {
			return
		}
		df := "FROM scratch\nCOPY prog /prog\nENTRYPOINT [\"/prog\"]\n"
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
			buildErr = err.Error()
			return
		}
		if out, err := exec.Command("docker", "build", "-q", "-t", Image, dir).CombinedOutput(); err != nil {
			buildErr = "docker build: " + err.Error() + ": " + string(out)
		}
	})
	if buildErr != "" {
		t.Fatalf("build test image: %s", buildErr)
	}
	return Image
}
