package structs

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNodeSecretTravelsInRaftNotJSON: the node secret is in Raft entries
// (servers check it) and never in JSON answers.
func TestNodeSecretTravelsInRaftNotJSON(t *testing.T) {
	n := &Node{ID: "n1", SecretID: "s3cret", Name: "gpu"}
	buf, err := Encode(NodeRegisterRequestType, &NodeRegisterRequest{Node: n})
	if err != nil {
		t.Fatal(err)
	}
	var got NodeRegisterRequest
	if err := Decode(buf[1:], &got); err != nil {
		t.Fatal(err)
	}
	if got.Node.SecretID != "s3cret" {
		t.Fatalf("secret after a Raft round trip: %q", got.Node.SecretID)
	}
	js, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), "s3cret") {
		t.Fatalf("secret in JSON: %s", js)
	}
}
