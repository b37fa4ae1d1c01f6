package http

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/server"
	"github.com/gpulayer/gpulayer/state"
	"github.com/gpulayer/gpulayer/state/statetest"
	"github.com/gpulayer/gpulayer/structs"
)

// eventsServer is the fake server with a real state store's event feed.
type eventsServer struct {
	*fakeServer
	st *state.StateStore
}

func (e *eventsServer) Events(from uint64, topics structs.EventTopics) server.EventSubscription {
	return e.st.Events().Subscribe(from, topics)
}

func TestEventStreamHTTP(t *testing.T) {
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	es := &eventsServer{fakeServer: newFakeServer(), st: st}
	h, err := New(Config{Server: es})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + ln.Addr().String()

	job := statetest.Job()
	if err := st.UpsertJob(5, job); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/v1/event/stream?index=1&topic=Job")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/x-ndjson" {
		t.Fatalf("%s %s", resp.Status, ct)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				return "<closed>"
			}
			return l
		case <-time.After(5 * time.Second):
			t.Fatal("no line within 5s")
			return ""
		}
	}
	var b structs.EventBatch
	if err := json.Unmarshal([]byte(next()), &b); err != nil || b.Index != 5 || b.Events[0].Key != job.ID {
		t.Fatalf("first batch %+v (%v)", b, err)
	}
	// A live write arrives on the open stream; a node write does not
	// pass the Job filter.
	if err := st.UpsertNode(6, statetest.Node(0)); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteJob(7, job.ID); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(next()), &b); err != nil || b.Index != 7 || b.Events[0].Type != structs.EventJobDeregistered {
		t.Fatalf("second batch %+v (%v)", b, err)
	}

	// A graceful shutdown ends the stream instead of waiting for it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with an open event stream: %v after %s", err, time.Since(start))
	}
	if l := next(); l != "<closed>" {
		t.Fatalf("stream still open after shutdown: %q", l)
	}
}

func TestEventStreamGoneAndBadInput(t *testing.T) {
	old, _ := state.NewStateStore()
	st, _ := state.NewStateStore()
	st.AdoptEvents(old, 100) // as after a snapshot restore at index 100
	es := &eventsServer{fakeServer: newFakeServer(), st: st}
	h, err := New(Config{Server: es})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, h)
	cases := []struct {
		query string
		code  int
		want  string
	}{
		{"?index=50", http.StatusGone, "events no longer held"},
		{"?index=-1", http.StatusBadRequest, "index parameter"},
		{"?topic=Jobs", http.StatusBadRequest, "topic"},
		{"?topic=Job:", http.StatusBadRequest, "empty key"},
	}
	for _, tc := range cases {
		resp, body := doReq(t, "GET", ts+"/v1/event/stream"+tc.query, "")
		if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.query, resp.StatusCode, body, tc.code, tc.want)
		}
	}
	// A server without an event feed says so.
	_, _, plain := fixture(t)
	resp, body := doReq(t, "GET", plain.URL+"/v1/event/stream", "")
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("no event source: %d %s", resp.StatusCode, body)
	}
	if !errors.Is(server.ErrEventsTruncated, state.ErrEventsTruncated) {
		t.Error("server.ErrEventsTruncated is not state's")
	}
}

func newTestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}
