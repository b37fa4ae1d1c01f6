package http

import (
	"net/http"
	"strings"
	"testing"
)

// TestLocalOnly runs LocalOnly over a real listener (the port check needs
// the connection's local address) with the requests browsers and the CLI
// send.
func TestLocalOnly(t *testing.T) {
	h, err := New(Config{Server: newFakeServer(), LocalOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	base := newTestServer(t, h) // http://127.0.0.1:PORT
	hostport := strings.TrimPrefix(base, "http://")
	port := hostport[strings.LastIndex(hostport, ":")+1:]
	cases := []struct {
		name, method, path, host string
		header                   map[string]string
		want                     int
	}{
		{"cli", "GET", "/v1/jobs", "", nil, 200},
		{"cli localhost", "GET", "/v1/jobs", "localhost:" + port, nil, 200},
		{"cli ipv6 name", "GET", "/v1/jobs", "[::1]:" + port, nil, 200},
		{"same-origin post", "POST", "/v1/jobs/parse", "", map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin"}, 400},
		{"same-origin get", "GET", "/v1/jobs", "", map[string]string{"Sec-Fetch-Site": "same-origin", "Referer": base + "/ui/"}, 200},
		{"typed url", "GET", "/v1/jobs", "", map[string]string{"Sec-Fetch-Site": "none"}, 200},
		{"rebinding", "GET", "/v1/jobs", "evil.example:" + port, nil, 403},
		{"rebinding to the ip of another port", "GET", "/v1/jobs", "127.0.0.1:1", nil, 403},
		{"rebinding without port", "GET", "/v1/jobs", "evil.example", nil, 403},
		{"cross-site post", "POST", "/v1/jobs", "", map[string]string{"Origin": "http://evil.example"}, 403},
		{"null origin", "POST", "/v1/jobs", "", map[string]string{"Origin": "null"}, 403},
		{"other localhost port", "POST", "/v1/jobs", "", map[string]string{"Origin": "http://localhost:3000"}, 403},
		{"no-cors without origin", "POST", "/v1/jobs", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, 403},
		{"same-site", "GET", "/v1/jobs", "", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
		{"foreign referer", "GET", "/v1/jobs", "", map[string]string{"Referer": "http://evil.example/page"}, 403},
		{"cross-site img of a ui page", "GET", "/ui/", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, 403},
		{"link to the ui", "GET", "/", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Referer": "https://github.com/x"}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == 403 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("403 without a JSON error")
			}
		})
	}
}
