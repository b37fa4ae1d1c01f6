package agent

import (
	"errors"
	"strings"
	"testing"
)

func TestParseConfigTLS(t *testing.T) {
	src := `
region = "west"
tls {
  http = true
  rpc  = true
  ca_file   = "ca.pem"
  cert_file = "west-server-gpulayer.pem"
  key_file  = "west-server-gpulayer-key.pem"
  verify_server_hostname = false
  verify_https_client    = false
}
`
	fc, err := ParseConfig("agent.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Merge(fc)
	if c.Region != "west" || c.region() != "west" {
		t.Errorf("region %q", c.Region)
	}
	tc := c.TLS
	if tc == nil || !tc.HTTP || !tc.RPC || tc.CAFile != "ca.pem" || tc.CertFile != "west-server-gpulayer.pem" || tc.KeyFile != "west-server-gpulayer-key.pem" {
		t.Fatalf("tls %+v", tc)
	}
	if tc.VerifyServerHostname == nil || *tc.VerifyServerHostname || tc.VerifyHTTPSClient == nil || *tc.VerifyHTTPSClient {
		t.Errorf("verify flags %+v", tc)
	}
	if DefaultConfig().region() != "global" {
		t.Error("default region is not global")
	}
}

func TestValidateTLSNamesTheField(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want string
	}{
		{"files missing", `tls { rpc = true }`, "tls.ca_file: required"},
		{"key missing", `tls {
  http = true
  ca_file = "a"
  cert_file = "b"
}`, "tls.key_file: required"},
		{"bad region", `region = "West Coast"`, "region"},
		{"unknown field", `tls { verify_everything = true }`, "verify_everything"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc, err := ParseConfig("agent.hcl", []byte(tc.src))
			if err == nil {
				c := DefaultConfig()
				c.Server.Enabled = true
				c.Merge(fc)
				err = c.Validate()
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want ErrConfig naming %q, got %v", tc.want, err)
			}
		})
	}
	// Off (no block or all false) needs no files.
	c := DefaultConfig()
	c.Server.Enabled = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if b, err := c.loadTLS(); b != nil || err != nil {
		t.Fatalf("loadTLS without a block: %v %v", b, err)
	}
}
