package server

import (
	"errors"
	"testing"

	"github.com/gpulayer/gpulayer/structs"
)

func TestFillAdvertise(t *testing.T) {
	ip := func() (string, error) { return "10.1.2.3", nil }
	none := func() (string, error) { return "", errNoPrivateIP }
	cases := []struct {
		name               string
		cfg                Config
		ip                 func() (string, error)
		wantRaft, wantHTTP string
		wantErr            error
	}{
		{name: "loopback kept", cfg: Config{RaftBindAddr: "127.0.0.1:4657", HTTPAddr: "127.0.0.1:4656"}, ip: ip, wantHTTP: "127.0.0.1:4656"},
		{name: "any ipv4", cfg: Config{RaftBindAddr: "0.0.0.0:4657", HTTPAddr: "0.0.0.0:4656"}, ip: ip, wantRaft: "10.1.2.3:4657", wantHTTP: "10.1.2.3:4656"},
		{name: "any ipv6", cfg: Config{RaftBindAddr: "[::]:4657"}, ip: ip, wantRaft: "10.1.2.3:4657"},
		{name: "empty host", cfg: Config{RaftBindAddr: ":4657"}, ip: ip, wantRaft: "10.1.2.3:4657"},
		{name: "explicit advertise wins", cfg: Config{RaftBindAddr: "0.0.0.0:4657", RaftAdvertiseAddr: "192.168.0.9:4657"}, ip: ip, wantRaft: "192.168.0.9:4657"},
		{name: "no private ip", cfg: Config{RaftBindAddr: "0.0.0.0:4657"}, ip: none, wantErr: errNoPrivateIP},
		{name: "malformed", cfg: Config{RaftBindAddr: "nope"}, ip: ip, wantErr: structs.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			err := c.fillAdvertise(tc.ip)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.RaftAdvertiseAddr != tc.wantRaft || c.HTTPAddr != tc.wantHTTP {
				t.Fatalf("raft advertise %q http %q, want %q %q", c.RaftAdvertiseAddr, c.HTTPAddr, tc.wantRaft, tc.wantHTTP)
			}
		})
	}
}
