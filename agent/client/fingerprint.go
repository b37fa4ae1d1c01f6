package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/agent/client/devices"
	"github.com/gpulayer/gpulayer/structs"
)

// Resources kept back for the OS and the agent on every node.
const (
	ReservedCPUMHz   = 100
	ReservedMemoryMB = 256
	// fallbackMHzPerCore is used when /proc/cpuinfo gives no clock speed.
	fallbackMHzPerCore = 1000
)

// fingerprintHost fills the node's attributes, CPU and memory. CPU is
// runtime.NumCPU() cores times the "cpu MHz" of /proc/cpuinfo (the first
// entry), or 1000 MHz per core when unknown; the attribute
// "cpu.frequency_source" says which. Memory is MemTotal of /proc/meminfo
// (sysctl hw.memsize on darwin).
func fingerprintHost(n *structs.Node) error {
	if n.Attributes == nil {
		n.Attributes = map[string]string{}
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	cores := runtime.NumCPU()
	mhz, src := cpuMHz()
	n.Attributes["kernel.name"] = runtime.GOOS
	n.Attributes["os.name"] = osName()
	n.Attributes["cpu.arch"] = runtime.GOARCH
	n.Attributes["cpu.numcores"] = strconv.Itoa(cores)
	n.Attributes["cpu.frequency"] = strconv.FormatInt(mhz, 10)
	n.Attributes["cpu.frequency_source"] = src
	n.Attributes["unique.hostname"] = host
	n.Attributes["memory_model"] = structs.MemoryModelDiscrete
	n.Attributes["availability"] = structs.AvailabilityContinuous

	memMB, err := memoryMB()
	if err != nil {
		return fmt.Errorf("fingerprint memory: %w", err)
	}
	n.Attributes["memory.totalbytes"] = strconv.FormatInt(memMB*1024*1024, 10)
	n.NodeResources = &structs.NodeResources{CPU: mhz * int64(cores), Cores: cores, MemoryMB: memMB}
	n.ReservedResources = &structs.NodeReservedResources{CPU: ReservedCPUMHz, MemoryMB: ReservedMemoryMB}
	return nil
}

// cpuMHz returns one core's clock in MHz and where the figure came from.
func cpuMHz() (int64, string) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return fallbackMHzPerCore, "default"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "cpu MHz" {
			continue
		}
		mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err == nil && mhz > 0 {
			return int64(mhz + 0.5), "/proc/cpuinfo"
		}
	}
	return fallbackMHzPerCore, "default"
}

// memoryMB returns the host's total memory in MiB.
func memoryMB() (int64, error) {
	if runtime.GOOS == "darwin" {
		out, err := exec.Command("sysctl", "-n", "hw.memsize").Output()
		if err != nil {
			return 0, fmt.Errorf("sysctl hw.memsize: %w", err)
		}
		b, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("sysctl hw.memsize: %w", err)
		}
		return b / (1024 * 1024), nil
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemTotal(b)
}

// parseMemTotal reads "MemTotal: N kB" from /proc/meminfo content.
func parseMemTotal(b []byte) (int64, error) {
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := strings.Cut(string(line), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			break
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("MemTotal: %w", err)
		}
		return kb / 1024, nil
	}
	return 0, errors.New("no MemTotal in /proc/meminfo")
}

// osName returns PRETTY_NAME-less ID of /etc/os-release, or GOOS.
func osName() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "ID="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

// fingerprintDevices returns the node's device groups: real NVIDIA GPUs,
// then declared simulated devices, then (dev mode, no real GPU, DevGPUs >
// 0) DevGPUs simulated GPUs.
func (c *Client) fingerprintDevices(nodeID string) []*structs.DeviceGroup {
	detect := c.cfg.detectGPUs
	if detect == nil {
		detect = devices.Detect
	}
	groups, err := detect()
	if err != nil {
		c.logger.Info("no NVIDIA GPUs: " + err.Error())
	}
	if c.cfg.detectGPUs == nil {
		if apple, err := devices.DetectApple(); err == nil {
			groups = append(groups, apple...)
		}
	}
	real := 0
	for _, g := range groups {
		real += len(g.Instances)
	}
	for _, g := range c.cfg.SimulatedDevices {
		groups = append(groups, g.Copy())
	}
	if c.cfg.DevMode && real == 0 && c.cfg.DevGPUs > 0 {
		c.logger.Warn(fmt.Sprintf("no GPU found; adding %d simulated NVIDIA GPUs (simulated = true); set -dev-gpus=0 to disable", c.cfg.DevGPUs))
		groups = append(groups, devices.Simulated(nodeID, c.cfg.DevGPUs))
	}
	for _, g := range groups {
		c.logger.Info("device found", "device", g.ID(), "instances", len(g.Instances))
	}
	return groups
}
