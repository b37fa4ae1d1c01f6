package command

import (
	"os"
	"path/filepath"
	"testing"
)

// The golden files under testdata are reviewed fixtures: written once
// with -update, read by a person, checked in, and compared on every run;
// -update rewrites them only when asked. So that a regression cannot be
// blessed by -update unnoticed, some of them are also checked against
// output written here by hand from the fake cluster's objects
// (fakeapi_test.go), independently of the code that renders them.

// handWritten is the expected output of commands against newFakeAPI,
// written by hand: the node ef567890-... named laptop in dc1 with no
// class, drivers native (healthy) and docker (not detected), three GPU
// instances, ready; the allocation abcd1234-... running task main since
// t0+2s (t0 = 2025-11-30T12:00:00Z) with 500 MHz, 256 MiB and GPU-aaaa.
var handWritten = map[string]struct {
	args []string
	want string
}{
	"node_status_list.golden": {[]string{"node", "status"}, "" +
		"ID        DC   Name    Class   Drivers  GPUs  Drain  Eligibility  Status\n" +
		"ef567890  dc1  laptop  <none>  native   3     false  eligible     ready\n"},
	"alloc_status.golden": {[]string{"alloc", "status", "abcd1234"}, "" +
		"ID                  = abcd1234-5678-90ab-cdef-111111111111\n" +
		"Eval ID             = 1a2b3c4d\n" +
		"Name                = hello-gpu.gpu[0]\n" +
		"Node ID             = ef567890\n" +
		"Node Name           = laptop\n" +
		"Job ID              = hello-gpu\n" +
		"Client Status       = running\n" +
		"Client Description  = Tasks are running\n" +
		"Desired Status      = run\n" +
		"Desired Description = <none>\n" +
		"Created             = 2025-11-30T12:00:01Z\n" +
		"Modified            = 2025-11-30T12:00:02Z\n" +
		"\n" +
		"Task \"main\" is \"running\"\n" +
		"State       = running\n" +
		"Exit Code   = <none>\n" +
		"Failed      = false\n" +
		"Restarts    = 0\n" +
		"Started At  = 2025-11-30T12:00:02Z\n" +
		"Finished At = <none>\n" +
		"CPU         = 500 MHz\n" +
		"Memory      = 256 MiB\n" +
		"Devices     = nvidia/gpu/NVIDIA H100 80GB HBM3: GPU-aaaa\n" +
		"\n" +
		"Recent Events:\n" +
		"Time                  Type      Description\n" +
		"2025-11-30T12:00:02Z  Started   Task started by client\n" +
		"2025-11-30T12:00:01Z  Received  Task received by client\n"},
}

// TestGoldenFilesMatchHandWrittenOutput: the checked-in golden files and
// the commands' output both equal the hand-written expectation, so
// neither a wrong golden file nor a rewrite with -update passes.
func TestGoldenFilesMatchHandWrittenOutput(t *testing.T) {
	for name, hw := range handWritten {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != hw.want {
				t.Errorf("testdata/%s differs from the hand-written output:\n--- file ---\n%s\n--- by hand ---\n%s", name, b, hw.want)
			}
			r := runCmd(t, newFakeAPI().serve(t).URL, hw.args...)
			if r.code != 0 || r.out != hw.want {
				t.Errorf("%v: exit %d, output differs from the hand-written one:\n--- got ---\n%s\n--- by hand ---\n%s", hw.args, r.code, r.out, hw.want)
			}
		})
	}
}
