package http

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpulayer/gpulayer/nomadish/api"
	"github.com/gpulayer/gpulayer/structs"
)

// TestEndpointRoutesOtherNamespaceToken (issue 14, hostile review): a
// token that may write namespace "prod" only learns nothing of, and
// changes nothing in, namespace "default" through any endpoint route:
// not by naming "*", not by naming prod while pointing an alias at a
// default endpoint, not by demoting default's alias from prod.
func TestEndpointRoutesOtherNamespaceToken(t *testing.T) {
	f := newACLFixture(t)
	ctx := context.Background()
	placeEndpointJobs(t, f.srv, "llm-a")
	if _, err := f.srv.ACLPolicyUpsert(ctx, &structs.ACLPolicy{Name: "prodwrite", Rules: `namespace "prod" { policy = "write" }`}); err != nil {
		t.Fatal(err)
	}
	prod, err := f.srv.ACLTokenUpsert(ctx, &structs.ACLToken{Name: "prod", Type: structs.ACLTokenTypeClient, Policies: []string{"prodwrite"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(f.serverAPI)
	t.Cleanup(ts.Close)
	tok := func(s string) map[string]string { return map[string]string{HeaderNomadToken: s} }
	// default's alias, promoted by its writer.
	if code, body, _ := send(t, "PUT", ts.URL+"/v1/endpoint/alias/llm.primary", []byte(`{"Endpoint":"llm-a"}`), tok(f.writeTok.SecretID)); code != 200 {
		t.Fatalf("promote in default: %d %s", code, body)
	}
	steps := []struct {
		name, method, path, body string
		// okCodes are the acceptable answers; a 200 must not name
		// default's endpoint or alias.
		okCodes []int
	}{
		{"list every namespace", "GET", "/v1/endpoints?namespace=*", "", []int{200, 403}},
		{"list default", "GET", "/v1/endpoints", "", []int{403}},
		{"aliases of every namespace", "GET", "/v1/endpoint/aliases?namespace=*", "", []int{200, 403}},
		{"info of default's endpoint", "GET", "/v1/endpoint/llm-a", "", []int{403}},
		{"info of default's endpoint from *", "GET", "/v1/endpoint/llm-a?namespace=*", "", []int{403}},
		{"info of default's alias from prod", "GET", "/v1/endpoint/llm.primary?namespace=prod", "", []int{404}},
		{"promote in prod onto default's endpoint", "PUT", "/v1/endpoint/alias/llm.primary?namespace=prod", `{"Endpoint":"llm-a"}`, []int{404}},
		{"promote in *", "PUT", "/v1/endpoint/alias/llm.primary?namespace=*", `{"Endpoint":"llm-a"}`, []int{403}},
		{"demote default's alias from prod", "DELETE", "/v1/endpoint/alias/llm.primary?namespace=prod", "", []int{404}},
		{"demote in default", "DELETE", "/v1/endpoint/alias/llm.primary", "", []int{403}},
		{"client endpoints of default", "GET", "/v1/client/endpoints", "", []int{403}},
		{"client endpoints of *", "GET", "/v1/client/endpoints?namespace=*", "", []int{403}},
	}
	for _, st := range steps {
		var body []byte
		if st.body != "" {
			body = []byte(st.body)
		}
		code, out, _ := send(t, st.method, ts.URL+st.path, body, tok(prod.SecretID))
		ok := false
		for _, c := range st.okCodes {
			ok = ok || c == code
		}
		if !ok {
			t.Errorf("%s: %d %s, want one of %v", st.name, code, out, st.okCodes)
		}
		if code == 200 && (strings.Contains(string(out), "llm-a") || strings.Contains(string(out), "llm.primary")) {
			t.Errorf("%s: answer leaks default's endpoint: %s", st.name, out)
		}
	}
	// default's alias is untouched.
	code, out, _ := send(t, "GET", ts.URL+"/v1/endpoint/aliases", nil, tok(f.readTok.SecretID))
	if code != 200 {
		t.Fatalf("aliases: %d %s", code, out)
	}
	as := decodeJSON[[]*api.EndpointAlias](t, out)
	if len(as) != 1 || as[0].Name != "llm.primary" || as[0].Endpoint != "llm-a" || as[0].Namespace != "default" {
		t.Fatalf("aliases after the prod token's tries: %s", out)
	}
}
