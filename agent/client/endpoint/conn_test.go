package endpoint

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/waittest"
)

func TestConnAliveSeesClosedAndStrayBytes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (client, server net.Conn) {
		t.Helper()
		acc := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			acc <- c
		}()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server = recvWithin(t, acc, 5*time.Second, "accept")
		t.Cleanup(func() { client.Close(); server.Close() })
		return client, server
	}

	c, _ := pair()
	if !connAlive(c) {
		t.Fatal("an open idle connection reads as dead")
	}
	c, s := pair()
	s.Close()
	waittest.Until(t, 5*time.Second, "the peer's close to be seen", func() bool { return !connAlive(c) })
	c, s = pair()
	if _, err := s.Write([]byte("HTTP/1.1 408 Request Timeout\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 5*time.Second, "stray bytes to be seen", func() bool { return !connAlive(c) })
	// The peek consumed nothing.
	var b [4]byte
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(b[:]); err != nil || string(b[:n]) != "HTTP" {
		t.Fatalf("read after peek: %q, %v", b[:n], err)
	}
}

func TestConcurrentSetMembersAndRequests(t *testing.T) {
	fms := []*fakeMember{newFakeMember(t, "a0"), newFakeMember(t, "a1"), newFakeMember(t, "a2")}
	r := startRouter(t, nil)
	ms := members(fms...)
	r.SetMembers(ms)
	waitAdmitted(t, r, "a0", "a1", "a2")

	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() { // a2's checks flap, a1's identity changes back and forth
		defer churn.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cur := append([]Member(nil), ms...)
			cur[2].ChecksPassing = i%2 == 0
			_ = r.Status()
			r.SetMembers(cur)
			time.Sleep(time.Millisecond)
		}
	}()
	c := testClient(t)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				req, _ := http.NewRequest(http.MethodGet, "http://"+r.Addr()+"/hello", nil)
				resp, err := c.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	churn.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
