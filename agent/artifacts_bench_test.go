package agent_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/command"
	"github.com/gpulayer/gpulayer/nomadish/api"
)

// procStatusKiB returns a "VmRSS"/"VmHWM" field of /proc/<pid>/status in
// KiB.
func procStatusKiB(tb testing.TB, pid int, field string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// BenchmarkArtifactTransfer1GiB is Must-show 4: a 1 GiB file uploaded to
// and downloaded from a `gpulayer agent -dev` through the API (the
// nomadish/api client, the download verified as it arrives), each as a
// ratio to `sha256sum` of the same file on this disk (goal: at least 0.5);
// the server's peak RSS during the transfers above its idle RSS (goal:
// under 100 MiB; /proc's VmHWM, reset through clear_refs after idle when
// the kernel allows, else counted from start, an upper bound); and the
// time of a second `artifact put` of the same bytes (it hashes the file,
// asks missing and sends no blob).
func BenchmarkArtifactTransfer1GiB(b *testing.B) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		b.Skip("no sha256sum")
	}
	const size = 1 << 30
	dir := b.TempDir()
	file := filepath.Join(dir, "blob.bin")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rng, size); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	digest := hex.EncodeToString(h.Sum(nil))

	// sha256sum of the same file, page cache warm (the second run).
	var shaSec float64
	for i := 0; i < 2; i++ {
		start := time.Now()
		out, err := exec.Command("sha256sum", file).Output()
		if err != nil || !strings.HasPrefix(string(out), digest) {
			b.Fatalf("sha256sum: %v %s", err, out)
		}
		shaSec = time.Since(start).Seconds()
	}

	a := startDevAgent(b, filepath.Join(dir, "data"))
	pid := a.cmd.Process.Pid
	client, err := api.NewClient(&api.Config{Address: a.addr})
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second) // let start-up settle before the idle figure
	idle := procStatusKiB(b, pid, "VmRSS")
	resetHWM := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0) == nil
	ctx := context.Background()

	b.ResetTimer()
	src, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := client.Artifacts().Put(ctx, digest, src, size, nil); err != nil {
		b.Fatal(err)
	}
	upSec := time.Since(start).Seconds()
	src.Close()

	start = time.Now()
	rc, err := client.Artifacts().Get(ctx, digest)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.CopyBuffer(io.Discard, rc, make([]byte, 1<<20))
	rc.Close()
	if err != nil || n != size {
		b.Fatalf("download: %d bytes, %v", n, err)
	}
	downSec := time.Since(start).Seconds()
	peak := procStatusKiB(b, pid, "VmHWM")

	start = time.Now()
	_, sent, err := command.PutArtifact(ctx, client, file, &api.ArtifactPutOptions{})
	if err != nil || sent {
		b.Fatalf("second put: sent=%v %v", sent, err)
	}
	againSec := time.Since(start).Seconds()
	start = time.Now()
	if missing, err := client.Artifacts().Missing([]string{digest}); err != nil || len(missing) != 0 {
		b.Fatalf("missing: %v %v", missing, err)
	}
	if _, err := client.Artifacts().Put(ctx, digest, nil, 0, nil); err != nil {
		b.Fatal(err)
	}
	claimMs := float64(time.Since(start).Microseconds()) / 1000
	b.StopTimer()

	mib := float64(size) / (1 << 20)
	b.ReportMetric(mib/shaSec, "MiB/s-sha256sum")
	b.ReportMetric(mib/upSec, "MiB/s-upload")
	b.ReportMetric(mib/downSec, "MiB/s-download")
	b.ReportMetric(shaSec/upSec, "upload/sha256sum")
	b.ReportMetric(shaSec/downSec, "download/sha256sum")
	b.ReportMetric(float64(peak-idle)/1024, "MiB-peak-rss-above-idle")
	b.ReportMetric(againSec*1000, "ms-second-put")
	b.ReportMetric(claimMs, "ms-second-put-network")
	b.Logf("idle RSS %d KiB, peak %d KiB (VmHWM reset after idle: %v)", idle, peak, resetHWM)
}
