package agent_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

// The cluster benchmarks measure a fixed workload per run and report it
// with b.ReportMetric; run them with -benchtime=1x (`make bench` does), as
// starting three server processes per b.N step would measure start-up.

// percentile returns the p-th percentile (0-100) of sorted durations, by
// the nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkClusterApply measures job registrations (PUT /v1/jobs) sent to
// the leader of a 3-server cluster of real processes on loopback, each
// acknowledged after a Raft commit on a majority (2 of 3 fsyncs of the
// BoltDB log): writes/s over the run, and p50 and p99 latency in ms, with
// 1 writer (300 writes) and with 64 concurrent writers (30 writes each).
func BenchmarkClusterApply(b *testing.B) {
	c := startCluster(b, 3, 0, 0)
	leader := c.waitStable(60 * time.Second)
	// ACLs are on: the requests carry the cluster's management token.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: tokenTransport{c: c, base: &http.Transport{MaxIdleConnsPerHost: 128}}}
	for _, tc := range []struct{ writers, each int }{{1, 300}, {64, 30}} {
		b.Run(fmt.Sprintf("writers=%d", tc.writers), func(b *testing.B) {
			lat := make([]time.Duration, 0, tc.writers*tc.each)
			var mu sync.Mutex
			var wg sync.WaitGroup
			errs := make(chan error, tc.writers)
			start := time.Now()
			for w := 0; w < tc.writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < tc.each; i++ {
						body, _ := json.Marshal(dockerJob(fmt.Sprintf("apply-%d-%d-%d", tc.writers, w, i)))
						t0 := time.Now()
						code, resp := putJSONWith(hc, leader.url()+"/v1/jobs", json.RawMessage(body))
						d := time.Since(t0)
						if code != http.StatusOK {
							errs <- fmt.Errorf("PUT /v1/jobs: %d %s", code, resp)
							return
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "writes/s")
			b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
			b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
		})
	}
}

// BenchmarkClusterFailover measures, five times, the time from killing
// the leader of a 3-server cluster (SIGKILL, process reaped) to the first
// acknowledged job registration, written in a loop to every live server
// in turn, and reports the median and the maximum in ms. The killed
// server is restarted and the cluster allowed to settle between rounds.
func BenchmarkClusterFailover(b *testing.B) {
	c := startCluster(b, 3, 0, 0)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: tokenTransport{c: c}}
	var took []time.Duration
	for round := 0; round < 5; round++ {
		leader := c.waitStable(60 * time.Second)
		leader.kill()
		killed := time.Now()
		n := 0
		for acked := false; !acked; {
			if time.Since(killed) > 60*time.Second {
				b.Fatalf("round %d: no write acknowledged within 60s of the leader kill", round)
			}
			for _, p := range c.servers {
				if p == leader {
					continue
				}
				n++
				body := dockerJob(fmt.Sprintf("failover-%d-%d", round, n))
				if code, _ := putJSONWith(hc, p.url()+"/v1/jobs", body); code == http.StatusOK {
					took = append(took, time.Since(killed))
					acked = true
					break
				}
			}
			if !acked {
				time.Sleep(5 * time.Millisecond)
			}
		}
		leader.start()
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(ms(took[len(took)/2]), "median-ms")
	b.ReportMetric(ms(took[len(took)-1]), "max-ms")
	if os.Getenv("GPULAYER_BENCH_VERBOSE") != "" {
		b.Logf("failover times: %v", took)
	}
}

// BenchmarkDiskFsync measures this disk's raw synchronous write rate, to
// put the cluster figures in context: for 2 seconds it overwrites the
// same 4 KiB at the start of a file in a temporary directory (the same
// file system as the benchmark clusters' data dirs) and calls fsync after
// each write, reporting fsyncs/s and the mean time of one write+fsync.
func BenchmarkDiskFsync(b *testing.B) {
	path := filepath.Join(b.TempDir(), "fsync.dat")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	n := 0
	start := time.Now()
	for time.Since(start) < 2*time.Second {
		if _, err := f.WriteAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "fsyncs/s")
	b.ReportMetric(float64(elapsed.Microseconds())/float64(n), "us/fsync")
}
