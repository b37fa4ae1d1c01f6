package endpoint

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
	"github.com/gpulayer/gpulayer/structs"
)

func TestRoundRobinSpreads1000RequestsInIndexOrder(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1"), newFakeMember(t, "a2")}
	r := startRouter(t, nil)
	// Index order, not the order given.
	ms := members(fms...)
	r.SetMembers([]Member{ms[2], ms[0], ms[1]})
	waitAdmitted(t, r, "a0", "a1", "a2")

	c := testClient(t)
	counts := map[string]int{}
	for i := 0; i < 1000; i++ {
		code, member, body := get(t, c, r, "/hello", fmt.Sprint("rr-", i))
		if code != http.StatusOK {
			t.Fatalf("request %d: status %d: %s", i, code, body)
		}
		if want := fms[i%3].id; member != want || body != "hello from "+want {
			t.Fatalf("request %d served by %q (%q), want %s", i, member, body, want)
		}
		counts[member]++
	}
	if counts["a0"] != 334 || counts["a1"] != 333 || counts["a2"] != 333 {
		t.Fatalf("spread %v, want a0 334, a1 333, a2 333", counts)
	}
	for i, fm := range fms {
		if n := len(fm.requests()); n != counts[fm.id] {
			t.Errorf("member %d logged %d requests, router says %d", i, n, counts[fm.id])
		}
	}
	// Kept-alive connections: one from the router's pool (requests are
	// sequential) and one from live verification per member.
	for _, fm := range fms {
		if n := fm.conns.Load(); n > 2 {
			t.Errorf("member %s accepted %d connections for 1,000 sequential requests, want at most 2", fm.id, n)
		}
	}
	st := r.Status()
	if st.Requests != 1000 || st.Failed != 0 || st.Admitted != 3 {
		t.Errorf("status requests %d failed %d admitted %d, want 1000 0 3", st.Requests, st.Failed, st.Admitted)
	}
	for _, m := range st.Members {
		if m.Served != uint64(counts[m.AllocID]) {
			t.Errorf("member %s served %d, want %d", m.AllocID, m.Served, counts[m.AllocID])
		}
	}
}

func TestMemberKilledBetweenRequestsIsSkippedWithoutFailures(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1"), newFakeMember(t, "a2")}
	// A long verification period: the data path alone must skip the
	// dead member until verification drops it.
	r := startRouter(t, func(c *Config) { c.VerifyInterval = time.Hour })
	r.SetMembers(members(fms...))
	waitAdmitted(t, r, "a0", "a1", "a2")

	c := testClient(t)
	for i := 0; i < 30; i++ { // every member holds kept-alive connections now
		if code, _, body := get(t, c, r, "/hello", fmt.Sprint("warm-", i)); code != http.StatusOK {
			t.Fatalf("warm-up %d: %d %s", i, code, body)
		}
	}
	fms[1].kill()
	before := len(fms[1].requests())
	for i := 0; i < 300; i++ {
		code, member, body := get(t, c, r, "/hello", fmt.Sprint("after-", i))
		if code != http.StatusOK {
			t.Fatalf("request %d after the kill: status %d: %s", i, code, body)
		}
		if member == "a1" {
			t.Fatalf("request %d after the kill served by the killed member", i)
		}
	}
	if n := len(fms[1].requests()); n != before {
		t.Fatalf("killed member logged %d requests after its kill", n-before)
	}
	// The failed dials asked for a verification, which drops it.
	waitAdmitted(t, r, "a0", "a2")
	if st := r.Status(); st.Failed != 0 {
		t.Fatalf("router counted %d failed requests", st.Failed)
	}
}

func TestMemberKilledMidStreamFailsThatRequestOnly(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1"), newFakeMember(t, "a2")}
	r := startRouter(t, nil)
	r.SetMembers(members(fms...))
	waitAdmitted(t, r, "a0", "a1", "a2")

	c := testClient(t)
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.Addr()+"/stream", nil)
	req.Header.Set(reqIDHeader, "stream-1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if m := resp.Header.Get(MemberHeader); m != "a0" {
		t.Fatalf("stream served by %q, want a0", m)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	recvWithin(t, fms[0].started, 5*time.Second, "the member to be mid-stream")
	fms[0].kill()
	rest, err := io.ReadAll(br)
	if err == nil {
		t.Fatalf("cut stream ended cleanly with %q; want an error", rest)
	}
	if strings.Contains(string(rest), "second") {
		t.Fatalf("got the second event from a killed member: %q", rest)
	}
	for _, fm := range fms {
		want := 0
		if fm == fms[0] {
			want = 1
		}
		if n := fm.saw("stream-1"); n != want {
			t.Errorf("member %s saw the stream request %d times, want %d (log %v)", fm.id, n, want, fm.requests())
		}
	}
	// Everything else keeps working.
	for i := 0; i < 20; i++ {
		if code, member, body := get(t, c, r, "/hello", fmt.Sprint("next-", i)); code != http.StatusOK || member == "a0" {
			t.Fatalf("request %d after the cut: %d from %q: %s", i, code, member, body)
		}
	}
}

func TestStreamingPassesThroughUnbuffered(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")

	req, _ := http.NewRequest(http.MethodGet, "http://"+r.Addr()+"/stream", nil)
	resp, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The member holds the rest of its stream until released: the first
	// event must arrive while it is still running.
	first := make(chan string, 1)
	br := bufio.NewReader(resp.Body)
	go func() {
		line, _ := br.ReadString('\n')
		first <- line
	}()
	if line := recvWithin(t, first, 5*time.Second, "the first event before the member finished"); line != "data: first\n" {
		t.Fatalf("first event %q", line)
	}
	fm.release()
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "data: second") {
		t.Fatalf("rest of stream %q, %v", rest, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
}

func TestFailureAfterDispatchIsNotReplayed(t *testing.T) {
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		want   int
	}{
		{"POST connection dropped", http.MethodPost, "/break", `{"prompt":"hi"}`, http.StatusBadGateway},
		{"GET connection dropped", http.MethodGet, "/break", "", http.StatusBadGateway},
		{"POST member 500", http.MethodPost, "/fail500", `{"prompt":"hi"}`, http.StatusInternalServerError},
		{"GET member 500", http.MethodGet, "/fail500", "", http.StatusInternalServerError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1"), newFakeMember(t, "a2")}
			r := startRouter(t, nil)
			r.SetMembers(members(fms...))
			waitAdmitted(t, r, "a0", "a1", "a2")
			c := testClient(t)
			// Warm up so that the request goes over a kept-alive
			// connection (where net/http's Transport would replay a
			// GET on its own).
			for i := 0; i < 3; i++ {
				get(t, c, r, "/hello", fmt.Sprint("warm-", i))
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequest(tc.method, "http://"+r.Addr()+tc.path, body)
			req.Header.Set(reqIDHeader, "once")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tc.want)
			}
			if tc.want == http.StatusInternalServerError && !strings.Contains(string(b), "member error from a0") {
				t.Errorf("the member's 500 body was not passed through: %q", b)
			}
			for _, fm := range fms {
				want := 0
				if fm == fms[0] { // the 4th request: round robin's a0
					want = 1
				}
				if n := fm.saw("once"); n != want {
					t.Errorf("member %s saw the request %d times, want %d (log %v)", fm.id, n, want, fm.requests())
				}
			}
		})
	}
}

func TestResponseHeaderTimeoutIs504AndNotReplayed(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1")}
	r := startRouter(t, func(c *Config) { c.ResponseHeaderTimeout = 200 * time.Millisecond })
	r.SetMembers(members(fms...))
	waitAdmitted(t, r, "a0", "a1")
	code, _, body := get(t, testClient(t), r, "/sleep", "late")
	if code != http.StatusGatewayTimeout {
		t.Fatalf("status %d (%s), want 504", code, body)
	}
	if fms[0].saw("late") != 1 || fms[1].saw("late") != 0 {
		t.Fatalf("logs a0 %v a1 %v, want the request at a0 only", fms[0].requests(), fms[1].requests())
	}
}

func TestNoMemberReachableIs502AndNoneAdmittedIs503(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, func(c *Config) { c.VerifyInterval = time.Hour })
	c := testClient(t)
	if code, _, _ := get(t, c, r, "/hello", "x"); code != http.StatusServiceUnavailable {
		t.Fatalf("no members: status %d, want 503", code)
	}
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	fm.kill()
	if code, _, _ := get(t, c, r, "/hello", "y"); code != http.StatusBadGateway {
		t.Fatalf("only member dead: status %d, want 502", code)
	}
}

func TestModelAndIdentityMismatchAreRefused(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1"), newFakeMember(t, "a2"),
		newFakeMember(t, "a3"), newFakeMember(t, "a4")}
	fms[1].setModel("some-other-model")
	r := startRouter(t, nil)
	ms := members(fms...)
	ms[2].Identity.ArtifactDigest = "sha256:bbbb" // another binary
	ms[3].Identity.JobVersion = 2
	ms[4].Identity.ConfigDigest = "sha256:dddd"
	r.SetMembers(ms)
	wantReasons := map[string]string{
		"a1": `GET /v1/models: model "llama-3-8b" not listed`,
		"a2": `artifact (image or binary) digest "sha256:bbbb" differs from the admitted members' "sha256:aaaa"`,
		"a3": `job version 2 differs from the admitted members' 1`,
		"a4": `config digest "sha256:dddd" differs from the admitted members' "sha256:cccc"`,
	}
	waittest.For(t, 10*time.Second, "the refusal reasons", func() (bool, string) {
		for id, want := range wantReasons {
			if got := reason(r, id); !strings.Contains(got, want) {
				return false, fmt.Sprintf("member %s reason %q, want it to hold %q", id, got, want)
			}
		}
		return true, ""
	})
	waitAdmitted(t, r, "a0")
	c := testClient(t)
	for i := 0; i < 20; i++ {
		if code, member, _ := get(t, c, r, "/hello", fmt.Sprint("m-", i)); code != http.StatusOK || member != "a0" {
			t.Fatalf("request %d: %d from %q, want a0", i, code, member)
		}
	}
	for _, fm := range fms[1:] {
		if n := len(fm.requests()); n != 0 {
			t.Errorf("refused member %s got %d requests", fm.id, n)
		}
	}
	// Fixing the model name admits it on the next verification.
	fms[1].setModel(testModel)
	waitAdmitted(t, r, "a0", "a1")
}

func TestAdmitReferenceIdentity(t *testing.T) {
	id := func(v uint64) structs.EndpointIdentity {
		return structs.EndpointIdentity{JobVersion: v, ArtifactDigest: "d", ConfigDigest: "c"}
	}
	mk := func(ids ...structs.EndpointIdentity) []*member {
		out := make([]*member, len(ids))
		for i, x := range ids {
			out[i] = &member{m: Member{AllocID: fmt.Sprint("a", i), Index: i, Identity: x, ChecksPassing: true}, verified: true}
		}
		return out
	}
	tests := []struct {
		name string
		ms   []*member
		want string // admitted flags
	}{
		{"all equal", mk(id(1), id(1), id(1)), "111"},
		{"majority wins over lower index", mk(id(2), id(1), id(1)), "011"},
		{"tie goes to the lowest index", mk(id(2), id(1), id(2), id(1)), "1010"},
		{"all differ: lowest index", mk(id(3), id(2), id(1)), "100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			for _, d := range admit(tc.ms) {
				if d.admitted {
					got += "1"
				} else {
					got += "0"
					if !strings.Contains(d.reason, "job version") {
						t.Errorf("reason %q does not name the job version", d.reason)
					}
				}
			}
			if got != tc.want {
				t.Fatalf("admitted %s, want %s", got, tc.want)
			}
		})
	}
	// Members failing checks or verification do not vote.
	ms := mk(id(2), id(2), id(1))
	ms[0].m.ChecksPassing = false
	ms[1].verified, ms[1].verifyReason = false, "GET /v1/models: status 500"
	ds := admit(ms)
	if ds[0].reason != reasonChecksFailing || ds[1].reason != "GET /v1/models: status 500" || !ds[2].admitted {
		t.Fatalf("decisions %+v", ds)
	}
}

func TestChecksFailingLeavesRotationAtOnce(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1")}
	r := startRouter(t, nil)
	ms := members(fms...)
	r.SetMembers(ms)
	waitAdmitted(t, r, "a0", "a1")
	ms[1].ChecksPassing = false
	r.SetMembers(ms)
	// No waiting: SetMembers returned, the member is out.
	c := testClient(t)
	for i := 0; i < 10; i++ {
		if code, member, _ := get(t, c, r, "/hello", fmt.Sprint("c-", i)); code != http.StatusOK || member != "a0" {
			t.Fatalf("request %d: %d from %q, want a0", i, code, member)
		}
	}
	if got := reason(r, "a1"); got != reasonChecksFailing {
		t.Fatalf("reason %q", got)
	}
}

func TestVerificationFailureDropsAndRecoveryReadmits(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1")}
	r := startRouter(t, nil)
	r.SetMembers(members(fms...))
	waitAdmitted(t, r, "a0", "a1")
	fms[1].modelsStatus.Store(http.StatusInternalServerError)
	waitAdmitted(t, r, "a0")
	if got := reason(r, "a1"); got != "GET /v1/models: status 500" {
		t.Fatalf("reason %q", got)
	}
	fms[1].modelsStatus.Store(0)
	waitAdmitted(t, r, "a0", "a1")
}

func TestIdentityChangeIsReverified(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1")}
	r := startRouter(t, nil)
	ms := members(fms...)
	r.SetMembers(ms)
	waitAdmitted(t, r, "a0", "a1")
	ms[1].Identity.JobVersion = 7
	r.SetMembers(ms)
	waitAdmitted(t, r, "a0")
	if got := reason(r, "a1"); !strings.Contains(got, "job version 7") && got != reasonUnverified {
		t.Fatalf("reason %q", got)
	}
	waittest.For(t, 5*time.Second, "a1 refused for its job version", func() (bool, string) {
		got := reason(r, "a1")
		return strings.HasPrefix(got, "job version 7 differs"), got
	})
	// Removing a member takes it out of the status.
	r.SetMembers(ms[:1])
	if st := r.Status(); len(st.Members) != 1 || st.Members[0].AllocID != "a0" {
		t.Fatalf("members %+v", st.Members)
	}
}

func TestLeastOutstandingAvoidsBusyMember(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1"), newFakeMember(t, "a2")}
	r := startRouter(t, func(c *Config) { c.Endpoint.Policy = structs.EndpointPolicyLeastOutstanding })
	r.SetMembers(members(fms...))
	waitAdmitted(t, r, "a0", "a1", "a2")
	c := testClient(t)

	slow := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+r.Addr()+"/slow", nil)
		resp, err := c.Do(req)
		if err != nil {
			slow <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	recvWithin(t, fms[0].started, 5*time.Second, "the slow request at a0")
	// a0 has one request in flight; the ties between a1 and a2 go in
	// round-robin order from the counter's position (1, 2, 0 -> a1, ...).
	// A request's count drops just after its client has the response:
	// wait for it so that only the slow request is in flight.
	settled := func(want0 int64) {
		waittest.For(t, 5*time.Second, "in-flight counts to settle", func() (bool, string) {
			ms := r.Status().Members
			return ms[0].Outstanding == want0 && ms[1].Outstanding == 0 && ms[2].Outstanding == 0, fmt.Sprintf("%+v", ms)
		})
	}
	var got []string
	for i := 0; i < 6; i++ {
		settled(1)
		code, member, _ := get(t, c, r, "/hello", fmt.Sprint("lo-", i))
		if code != http.StatusOK {
			t.Fatalf("request %d: %d", i, code)
		}
		got = append(got, member)
	}
	if want := "[a1 a2 a1 a1 a2 a1]"; fmt.Sprint(got) != want {
		t.Fatalf("served by %v, want %s", got, want)
	}
	fms[0].release()
	if code := recvWithin(t, slow, 5*time.Second, "the slow request"); code != http.StatusOK {
		t.Fatalf("slow request status %d", code)
	}
	// Nothing in flight: plain round robin again.
	got = got[:0]
	for i := 0; i < 3; i++ {
		settled(0)
		_, member, _ := get(t, c, r, "/hello", fmt.Sprint("rr-", i))
		got = append(got, member)
	}
	if want := "[a1 a2 a0]"; fmt.Sprint(got) != want { // counter at 7, 8, 9
		t.Fatalf("served by %v, want %s", got, want)
	}
}

func TestStatusCallback(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1")}
	var mu sync.Mutex
	var events []string
	var r *Router
	r = startRouter(t, func(c *Config) {
		c.OnStatus = func(id string, st structs.EndpointMemberStatus) {
			// The callback may call the router: it runs under no lock.
			_ = r.Status()
			mu.Lock()
			defer mu.Unlock()
			if st.UpdatedAt == 0 || st.Identity != testIdentity {
				events = append(events, "bad status "+fmt.Sprintf("%+v", st))
			}
			events = append(events, fmt.Sprintf("%s %v %s", id, st.Admitted, st.Reason))
		}
	})
	ms := members(fms...)
	r.SetMembers(ms)
	waitAdmitted(t, r, "a0", "a1")
	ms[1].ChecksPassing = false
	r.SetMembers(ms)
	want := []string{
		"a0 false " + reasonUnverified, "a1 false " + reasonUnverified,
		"a0 true ", "a1 true ", "a1 false " + reasonChecksFailing,
	}
	waittest.For(t, 5*time.Second, "status calls", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		if len(events) < len(want) {
			return false, fmt.Sprint(events)
		}
		// The two verifications may finish in either order.
		got := append([]string(nil), events...)
		if got[2] > got[3] {
			got[2], got[3] = got[3], got[2]
		}
		return fmt.Sprintf("%q", got) == fmt.Sprintf("%q", want), fmt.Sprintf("%q", events)
	})
}

func TestCloseDrainsInFlightRequests(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, nil)
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	addr := r.Addr()
	c := testClient(t)
	type result struct {
		code int
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := c.Get("http://" + addr + "/slow")
		if err != nil {
			res <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{resp.StatusCode, string(b), err}
	}()
	recvWithin(t, fm.started, 5*time.Second, "the slow request at the member")
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	waittest.Until(t, 5*time.Second, "the listener to close", func() bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		_ = conn.Close()
		return false
	})
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a request in flight", err)
	default:
	}
	fm.release()
	got := recvWithin(t, res, 5*time.Second, "the drained request")
	if got.err != nil || got.code != http.StatusOK || got.body != "slow from a0" {
		t.Fatalf("drained request: %d %q %v", got.code, got.body, got.err)
	}
	if err := recvWithin(t, closed, 5*time.Second, "Close"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.Start(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
}

func TestCloseCutsRequestsAfterTheDrainTimeout(t *testing.T) {
	fm := newFakeMember(t, "a0")
	r := startRouter(t, func(c *Config) { c.DrainTimeout = 100 * time.Millisecond })
	r.SetMembers(members(fm))
	waitAdmitted(t, r, "a0")
	errc := make(chan error, 1)
	go func() {
		resp, err := testClient(t).Get("http://" + r.Addr() + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	recvWithin(t, fm.started, 5*time.Second, "the slow request at the member")
	if err := r.Close(); err == nil {
		t.Fatal("Close with a stuck request returned nil, want a drain error")
	}
	if err := recvWithin(t, errc, 5*time.Second, "the cut request"); err == nil {
		t.Fatal("the cut request succeeded")
	}
}

func TestPostToAKilledMemberGoesToTheNextBeforeAnyByteIsSent(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1")}
	r := startRouter(t, func(c *Config) { c.VerifyInterval = time.Hour })
	r.SetMembers(members(fms...))
	waitAdmitted(t, r, "a0", "a1")
	c := testClient(t)
	for i := 0; i < 4; i++ { // pooled connections to both
		get(t, c, r, "/hello", fmt.Sprint("warm-", i))
	}
	fms[0].kill()
	for i := 0; i < 4; i++ {
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.Addr()+"/echo", strings.NewReader(fmt.Sprint(`{"n":`, i, `}`)))
		req.Header.Set(reqIDHeader, fmt.Sprint("post-", i))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != fmt.Sprint(`{"n":`, i, `}`) || resp.Header.Get(MemberHeader) != "a1" {
			t.Fatalf("POST %d: %d %q from %q", i, resp.StatusCode, b, resp.Header.Get(MemberHeader))
		}
	}
}
