package docker

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpulayer/gpulayer/server/provision"
	"github.com/gpulayer/gpulayer/structs"
)

// Bounds on a create request's fields (they become labels and agent
// config values).
const (
	maxKeyLen      = 256
	maxNodeNameLen = 128
	maxGPUs        = 64
	maxServers     = 16
	maxTokenLen    = 256 // the agent's acl.token bound
)

// checkRequest bounds what a request puts in labels and the agent config.
func checkRequest(req provision.CreateRequest) error {
	optional := func(field, v string, max int) error {
		if len(v) > max {
			return fmt.Errorf("docker provider: %s: at most %d bytes, got %d", field, max, len(v))
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("docker provider: %s: not valid UTF-8", field)
		}
		if strings.ContainsFunc(v, isControl) {
			return fmt.Errorf("docker provider: %s: %q holds control characters", field, v)
		}
		return nil
	}
	text := func(field, v string, max int) error {
		if v == "" {
			return fmt.Errorf("docker provider: %s: required", field)
		}
		return optional(field, v, max)
	}
	if !structs.ValidNodePoolName(req.Pool) || req.Pool == structs.NodePoolAll {
		return fmt.Errorf("docker provider: pool: %q is not a node pool a node can join", req.Pool)
	}
	if err := text("idempotency key", req.IdempotencyKey, maxKeyLen); err != nil {
		return err
	}
	if err := text("node name", req.NodeName, maxNodeNameLen); err != nil {
		return err
	}
	sh := req.Shape
	if err := optional("shape node class", sh.NodeClass, maxNodeNameLen); err != nil {
		return err
	}
	if err := optional("shape gpu model", sh.GPUModel, maxKeyLen); err != nil {
		return err
	}
	if sh.GPUCount < 0 || sh.GPUCount > maxGPUs {
		return fmt.Errorf("docker provider: shape gpu count: must be 0 to %d, got %d", maxGPUs, sh.GPUCount)
	}
	if sh.GPUMemoryMB < 0 {
		return fmt.Errorf("docker provider: shape gpu memory: must be 0 or more MiB, got %d", sh.GPUMemoryMB)
	}
	switch sh.MemoryModel {
	case "", "discrete", "unified":
	default:
		return fmt.Errorf("docker provider: shape memory model: %q is not discrete or unified", sh.MemoryModel)
	}
	switch sh.Availability {
	case "", "continuous", "opportunistic":
	default:
		return fmt.Errorf("docker provider: shape availability: %q is not continuous or opportunistic", sh.Availability)
	}
	if len(req.Join.Servers) == 0 || len(req.Join.Servers) > maxServers {
		return fmt.Errorf("docker provider: join servers: must name 1 to %d addresses, got %d", maxServers, len(req.Join.Servers))
	}
	for _, s := range req.Join.Servers {
		if err := text("join server", s, 256); err != nil {
			return err
		}
	}
	if err := optional("join region", req.Join.Region, maxNodeNameLen); err != nil {
		return err
	}
	if err := optional("join datacenter", req.Join.Datacenter, maxNodeNameLen); err != nil {
		return err
	}
	// The token's value is never quoted in an error.
	if len(req.Join.Token) > maxTokenLen || !utf8.ValidString(req.Join.Token) || strings.ContainsFunc(req.Join.Token, isControl) {
		return fmt.Errorf("docker provider: join token: must be at most %d bytes of printable UTF-8", maxTokenLen)
	}
	return nil
}

// agentConfig renders the container agent's config file: a client-only
// agent named req.NodeName in node pool req.Pool on 127.0.0.1:port with the pool's shape as
// simulated GPUs and node class, joining req.Join's servers with its
// token. Values are written by hclwrite (quoted and escaped, templates
// included), never pasted into the text.
func agentConfig(req provision.CreateRequest, s Settings, port int) ([]byte, error) {
	f := hclwrite.NewEmptyFile()
	b := f.Body()
	str := func(body *hclwrite.Body, name, v string) {
		if v != "" {
			body.SetAttributeValue(name, cty.StringVal(v))
		}
	}
	str(b, "name", req.NodeName)
	str(b, "data_dir", DataDir)
	str(b, "bind_addr", "127.0.0.1")
	str(b, "log_level", s.LogLevel)
	str(b, "region", req.Join.Region)
	str(b, "datacenter", req.Join.Datacenter)
	ports := b.AppendNewBlock("ports", nil).Body()
	ports.SetAttributeValue("http", cty.NumberIntVal(int64(port)))
	if req.Join.Token != "" {
		str(b.AppendNewBlock("acl", nil).Body(), "token", req.Join.Token)
	}
	cl := b.AppendNewBlock("client", nil).Body()
	cl.SetAttributeValue("enabled", cty.True)
	servers := make([]cty.Value, 0, len(req.Join.Servers))
	for _, sv := range req.Join.Servers {
		servers = append(servers, cty.StringVal(sv))
	}
	cl.SetAttributeValue("servers", cty.ListVal(servers))
	str(cl, "node_pool", req.Pool)
	if lo, hi, ok := dynamicPortWindow(s.HTTPPorts, port); ok {
		cl.SetAttributeValue("min_dynamic_port", cty.NumberIntVal(int64(lo)))
		cl.SetAttributeValue("max_dynamic_port", cty.NumberIntVal(int64(hi)))
	}
	sh := req.Shape
	str(cl, "node_class", sh.NodeClass)
	str(cl, "memory_model", sh.MemoryModel)
	str(cl, "availability", sh.Availability)
	if sh.GPUCount > 0 {
		g := cl.AppendNewBlock("simulated_gpu", nil).Body()
		g.SetAttributeValue("count", cty.NumberIntVal(int64(sh.GPUCount)))
		str(g, "model", sh.GPUModel)
		if sh.GPUMemoryMB > 0 {
			g.SetAttributeValue("memory", cty.NumberIntVal(int64(sh.GPUMemoryMB)))
		}
	} else {
		cl.SetAttributeValue("dev_gpus", cty.NumberIntVal(0))
	}
	return f.Bytes(), nil
}

// minPortWindow is the fewest dynamic ports a container's window holds;
// with more HTTP ports than the range can split into windows this wide,
// every agent keeps the whole default range.
const minPortWindow = 8

// dynamicPortWindow gives the container whose agent listens on port (the
// i-th of ports) the i-th of len(ports) equal slices of the default
// dynamic port range (20000-32000): the containers share the host's
// network, so their tasks' dynamic ports must not overlap.
func dynamicPortWindow(ports []int, port int) (lo, hi int, ok bool) {
	idx := slices.Index(ports, port)
	if idx < 0 || len(ports) == 0 {
		return 0, 0, false
	}
	width := (structs.DefaultMaxDynamicPort - structs.DefaultMinDynamicPort + 1) / len(ports)
	if width < minPortWindow {
		return 0, 0, false
	}
	lo = structs.DefaultMinDynamicPort + idx*width
	return lo, lo + width - 1, true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
