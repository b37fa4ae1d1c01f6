package agent

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/agent/tlsutil"
)

func TestParseConfigCluster(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(make([]byte, 32))
	src := `
server {
  enabled          = true
  bootstrap_expect = 3
  raft_multiplier  = 5
  retry_join       = ["10.0.0.2", "10.0.0.3:5000"]
  encrypt          = "` + key + `"
}
client {
  enabled = true
  servers = ["10.0.0.2:4656", "http://10.0.0.3:4656"]
}
`
	fileCfg, err := ParseConfig("agent.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Merge(fileCfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.RetryJoinAddrs(), ","); got != "10.0.0.2:4658,10.0.0.3:5000" {
		t.Errorf("retry join addrs %s", got)
	}
	if len(cfg.GossipKey()) != 32 || cfg.Server.BootstrapExpect != 3 {
		t.Errorf("key %d bytes, expect %d", len(cfg.GossipKey()), cfg.Server.BootstrapExpect)
	}
	if cfg.Server.RaftMultiplier != 5 {
		t.Errorf("raft multiplier %d, want 5", cfg.Server.RaftMultiplier)
	}
	if len(cfg.Client.Servers) != 2 || cfg.SerfAddr() != "0.0.0.0:4658" {
		t.Errorf("servers %v serf %s", cfg.Client.Servers, cfg.SerfAddr())
	}
	// Flags (merged later) replace the file's lists rather than append.
	cfg.Merge(&Config{Server: &ServerConfig{RetryJoin: []string{"10.0.0.9"}}, Client: &ClientConfig{}})
	if got := strings.Join(cfg.Server.RetryJoin, ","); got != "10.0.0.9" {
		t.Errorf("retry join after flag merge: %s", got)
	}
}

func TestValidateClusterBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"key not base64", func(c *Config) { c.Server.Encrypt = "not base64!" }, "server.encrypt: not base64"},
		{"key wrong size", func(c *Config) { c.Server.Encrypt = base64.StdEncoding.EncodeToString(make([]byte, 10)) }, "server.encrypt: key is 10 bytes"},
		{"empty join address", func(c *Config) { c.Server.RetryJoin = []string{"a", " "} }, "server.retry_join[1]: empty"},
		{"join port", func(c *Config) { c.Server.RetryJoin = []string{"a:0"} }, "server.retry_join[0]"},
		{"join URL", func(c *Config) { c.Server.RetryJoin = []string{"http://a"} }, "want host or host:port"},
		{"client without servers", func(c *Config) { c.Server.Enabled = false }, "client.servers: a client without a local server"},
		{"bad server address", func(c *Config) { c.Client.Servers = []string{"a:1", "b"} }, "client.servers[1]"},
		{"http bind not an IP", func(c *Config) { c.Addresses.HTTP = "localhost" }, "addresses.http"},
		{"dev with three servers", func(c *Config) { c.DevMode = true; c.Server.BootstrapExpect = 3 }, "server.bootstrap_expect: dev mode"},
		{"raft multiplier negative", func(c *Config) { c.Server.RaftMultiplier = -1 }, "server.raft_multiplier: want 1 to 10, got -1"},
		{"raft multiplier too large", func(c *Config) { c.Server.RaftMultiplier = 11 }, "server.raft_multiplier: want 1 to 10, got 11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Server.Enabled = true
			c.Client.Enabled = true
			tc.mod(c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestHTTPAddresses(t *testing.T) {
	fileCfg, err := ParseConfig("agent.hcl", []byte("bind_addr = \"10.0.0.5\"\naddresses {\n  http = \"0.0.0.0\"\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Merge(fileCfg)
	if got := c.HTTPAddr(); got != "0.0.0.0:4656" {
		t.Errorf("listener %s", got)
	}
	if got := c.RaftAddr(); got != "10.0.0.5:4657" {
		t.Errorf("raft %s", got)
	}
	for listen, want := range map[string]string{"0.0.0.0:4656": "10.0.0.5:4656", "[::]:80": "10.0.0.5:80", "10.0.0.9:1": "10.0.0.9:1", "junk": "junk"} {
		if got := c.HTTPAdvertiseAddr(listen); got != want {
			t.Errorf("advertise for %s = %s, want %s", listen, got, want)
		}
	}
}

func TestParseConfigClusterBadTypes(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"server {\n  retry_join = \"10.0.0.2\"\n}\n", "agent.hcl:2:"},
		{"client {\n  servers = 4656\n}\n", "agent.hcl:2:"},
		{"server {\n  encrypt = [1]\n}\n", "agent.hcl:2:"},
	} {
		_, err := ParseConfig("agent.hcl", []byte(tc.src))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error at %s", tc.src, err, tc.want)
		}
	}
}

// FuzzNormalizeJoinAddr: any string is an address or an error, never a
// panic, and an accepted one splits into host and port.
func FuzzNormalizeJoinAddr(f *testing.F) {
	for _, s := range []string{"a", "a:1", "[::1]", "[::1]:2", "", ":", "a:b", "http://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := normalizeJoinAddr(s, 4658)
		if err != nil {
			return
		}
		if !strings.Contains(out, ":") {
			t.Fatalf("%q normalized to %q without a port", s, out)
		}
	})
}

// TestExploitRogueGossipVoterConfig: a served agent that would join other
// servers (bootstrap_expect > 1 or retry_join) over gossip with neither a
// key nor tls.rpc let anyone who reached its gossip port become a Raft
// voter; such a config now fails validation with an error that says how to
// make a key. A key, tls.rpc or the loud opt-out pass; -dev and a single
// server are not affected.
func TestExploitRogueGossipVoterConfig(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, tc := range []struct {
		name, src string
		want      string // "" means valid
	}{
		{"three servers, no key", "server {\n  enabled = true\n  bootstrap_expect = 3\n}\n", "server.bootstrap_expect: 3 servers"},
		{"retry_join, no key", "server {\n  enabled = true\n  retry_join = [\"10.0.0.2\"]\n}\n", "server.retry_join: gossip is neither encrypted"},
		{"three servers with a key", "server {\n  enabled = true\n  bootstrap_expect = 3\n  encrypt = \"" + key + "\"\n}\n", ""},
		{"three servers, loud opt-out", "server {\n  enabled = true\n  bootstrap_expect = 3\n  allow_unauthenticated_gossip = true\n}\n", ""},
		{"single server", "server {\n  enabled = true\n}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fileCfg, err := ParseConfig("agent.hcl", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			c := DefaultConfig()
			c.Merge(fileCfg)
			err = c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("got %v, want ErrConfig", err)
			}
			for _, w := range []string{tc.want, "gpulayer operator gossip keyring generate", "server { encrypt", "tls { rpc = true }", "allow_unauthenticated_gossip"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// tls.rpc authenticates servers without a gossip key.
	c := DefaultConfig()
	c.Server.Enabled, c.Server.BootstrapExpect = true, 3
	c.TLS = &tlsutil.Config{RPC: true}
	if p := c.validateGossipAuth(); len(p) != 0 {
		t.Errorf("tls.rpc without a key refused: %v", p)
	}
	// -dev is one server without gossip.
	c = DefaultConfig()
	c.DevMode, c.Server.Enabled, c.Server.RetryJoin = true, true, []string{"10.0.0.2"}
	if p := c.validateGossipAuth(); len(p) != 0 {
		t.Errorf("dev mode refused: %v", p)
	}
}

// TestDevIgnoredRaftMultiplier: -dev with raft_multiplier above 1 warns
// that the multiplier does not apply (the dev server keeps its 200 ms
// timeouts); without -dev, or at 1, nothing is said.
func TestDevIgnoredRaftMultiplier(t *testing.T) {
	c := DefaultConfig()
	c.DevMode, c.Server.Enabled, c.Server.RaftMultiplier = true, true, 5
	w := c.devIgnored()
	if len(w) != 1 || !strings.Contains(w[0], "server.raft_multiplier = 5 is ignored with -dev") {
		t.Fatalf("dev with multiplier 5: %q", w)
	}
	c.Server.RaftMultiplier = 1
	if w := c.devIgnored(); len(w) != 0 {
		t.Fatalf("dev with multiplier 1: %q", w)
	}
	c.DevMode, c.Server.RaftMultiplier = false, 5
	if w := c.devIgnored(); len(w) != 0 {
		t.Fatalf("not dev: %q", w)
	}
}
