// Package dockertest builds the docker driver tests' image: a FROM scratch
// image holding one static Go program (testdata/prog), built locally so no
// registry is needed.
package dockertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Image is the tag of the test image.
const Image = "gpulayer-test-prog:latest"

var (
	buildOnce sync.Once
	buildErr  string
)

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
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "..", "testdata", "prog")
		dir, err := os.MkdirTemp("", "gpulayer-prog")
		if err != nil {
			buildErr = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "prog"), ".")
		build.Dir = src
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = "go build testdata/prog: " + err.Error() + ": " + string(out)
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
