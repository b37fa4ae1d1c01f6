package agent

import (
	"fmt"
	"net"
)

// OutputsConfig is the client's `outputs { max_files max_bytes }` block:
// the per-task bounds of what a task's $GPULAYER_OUTPUT_DIR may hold to
// be uploaded when it ends. Over a bound nothing of that task is
// recorded and the task gets a "Failed Outputs Upload" event.
type OutputsConfig struct {
	// MaxFiles: 0 means 1,000; at most 100,000.
	MaxFiles int `hcl:"max_files,optional"`
	// MaxBytes: 0 means 512 MiB (536870912); at most 1 TiB.
	MaxBytes int64 `hcl:"max_bytes,optional"`
}

// validateOutputs lists what is wrong with the outputs block.
func (c *ClientConfig) validateOutputs() []string {
	o := c.Outputs
	if o == nil {
		return nil
	}
	var p []string
	if o.MaxFiles < 0 || o.MaxFiles > 100_000 {
		p = append(p, fmt.Sprintf("client.outputs.max_files: must be between 0 (default 1000) and 100000, got %d", o.MaxFiles))
	}
	if o.MaxBytes < 0 || o.MaxBytes > 1<<40 {
		p = append(p, fmt.Sprintf("client.outputs.max_bytes: must be between 0 (default 512 MiB) and 1 TiB in bytes, got %d", o.MaxBytes))
	}
	return p
}

// outputLimits returns max_files and max_bytes (0: the client's default).
func (c *ClientConfig) outputLimits() (int, int64) {
	if c.Outputs == nil {
		return 0, 0
	}
	return c.Outputs.MaxFiles, c.Outputs.MaxBytes
}

// loopbackAddr turns a listener address bound to every interface
// ("0.0.0.0:4656", "[::]:4656") into one this host can dial
// ("127.0.0.1:4656"); other addresses are returned as they are.
func loopbackAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
