package endpoint_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gpulayer/gpulayer/agent/client/endpoint"
	"github.com/gpulayer/gpulayer/structs"
)

// The client agent makes one router per endpoint, starts it, and hands it
// the endpoint's members whenever they change; the router admits each
// member once its models listing names the model.
func ExampleRouter() {
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama-3-8b","object":"model"}]}`)
			return
		}
		_, _ = io.WriteString(w, "completion")
	}))
	defer member.Close()

	r, err := endpoint.New(endpoint.Config{
		Endpoint:   &structs.Endpoint{Name: "llm-8b", Port: 9000, Model: "llama-3-8b"},
		ListenAddr: "127.0.0.1:0",
		OnStatus: func(allocID string, st structs.EndpointMemberStatus) {
			// Report st with the allocation's status.
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	r.SetMembers([]endpoint.Member{{
		AllocID:       "8f3c1d2e",
		Index:         0,
		Addr:          member.Listener.Addr().String(),
		Identity:      structs.EndpointIdentity{JobVersion: 1, ArtifactDigest: "sha256:ab12", ConfigDigest: "sha256:cd34"},
		ChecksPassing: true,
	}})
	for deadline := time.Now().Add(10 * time.Second); r.Status().Admitted == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}

	resp, err := http.Get("http://" + r.Addr() + "/v1/completions")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, resp.Header.Get(endpoint.MemberHeader), string(body))
	// Output: 200 8f3c1d2e completion
}
