package http

import (
	"net/http/httptest"
	"testing"
)

// BenchmarkACLCheck measures the one ACL check a request pays with ACLs
// on: token header read, resolve (cached: the ACL tables did not change),
// path values, the namespace lookup of a job route and the capability
// check. "off" is the same call with ACLs off (the route table lookup
// only). Run with `make bench`; the per-request cost is ns/op of "on".
func BenchmarkACLCheck(b *testing.B) {
	f := newACLFixture(b)
	for _, tc := range []struct {
		name, pattern, method, path string
	}{
		{"on/PUT_jobs", "PUT /v1/jobs", "PUT", "/v1/jobs"},
		{"on/GET_job", "GET /v1/job/{id}", "GET", "/v1/job/" + f.jobID},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			r.Header.Set(HeaderNomadToken, f.writeTok.SecretID)
			if _, err := f.serverAPI.authorize(r, tc.pattern); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := f.serverAPI.authorize(r, tc.pattern); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("off/PUT_jobs", func(b *testing.B) {
		f.serverAPI.aclEnabled = false
		defer func() { f.serverAPI.aclEnabled = true }()
		r := httptest.NewRequest("PUT", "/v1/jobs", nil)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := f.serverAPI.authorize(r, "PUT /v1/jobs"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
