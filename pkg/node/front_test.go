// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/node"
	"github.com/gorilla/websocket"
)

// shortTimeouts make the front's limits observable in a test.
var shortTimeouts = node.FrontTimeouts{
	ReadHeader:  300 * time.Millisecond,
	Idle:        300 * time.Millisecond,
	BodyGrace:   300 * time.Millisecond,
	BodyMinRate: 1000,
}

// serveFront serves the front on loopback with t and a handler that reads
// the whole body and reports how the read ended on bodies.
func serveFront(t *testing.T, timeouts node.FrontTimeouts, ws func(*websocket.Conn)) (addr string, bodies <-chan error) {
	t.Helper()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 16)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			ws(c)
			return
		}
		n, err := io.Copy(io.Discard, r.Body)
		got <- err
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/slow" {
			// A handler that works on after the whole body is in, for
			// longer than the body's allowance: its context stays alive.
			select {
			case <-r.Context().Done():
				http.Error(w, "request context ended", http.StatusInternalServerError)
				return
			case <-time.After(3 * timeouts.BodyGrace):
			}
		}
		fmt.Fprintf(w, "%d bytes", n)
	})
	shutdown := node.ServeFrontWith(ln, h, h, timeouts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String(), got
}

// trickle writes head, then one byte of body every interval until the
// server closes the connection, and returns what the server answered and
// how long it held the connection; it gives up after limit.
func trickle(t *testing.T, addr, head string, interval, limit time.Duration) (string, time.Duration) {
	t.Helper()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	started := time.Now()
	if err := conn.SetDeadline(started.Add(limit)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(conn) // until the server closes, or the deadline
		read <- b
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case b := <-read:
			held := time.Since(started)
			if held >= limit {
				t.Fatalf("the server held a trickled request for %s (limit of the test)", limit)
			}
			return string(b), held
		case <-tick.C:
			_, _ = conn.Write([]byte{'x'}) // fails once the server has closed
		}
	}
}

// postOnce posts on a connection of its own. A client that kept the
// connection for the next request would race the front's idle timeout (300
// ms here): a request written as the server closes the idle connection fails
// with a broken pipe, and net/http does not retry a POST.
func postOnce(url, contentType string, body io.Reader) (*http.Response, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return c.Post(url, contentType, body)
}

// TestFrontCutsSlowClients: a request whose headers or body trickle in (one
// byte per 50 ms, well under the minimum rate) loses its connection after
// the grace time instead of holding it for ever; a body at full speed, far
// longer than the grace time allows at the minimum rate, goes through.
func TestFrontCutsSlowClients(t *testing.T) {
	t.Parallel()

	addr, bodies := serveFront(t, shortTimeouts, nil)
	const limit = 10 * time.Second

	t.Run("headers", func(t *testing.T) {
		resp, held := trickle(t, addr, "POST /bytes HTTP/1.1\r\nHost: x\r\nX-Slow: ", 50*time.Millisecond, limit)
		t.Logf("held %s; answered %q", held, firstLine(resp))
	})

	t.Run("body", func(t *testing.T) {
		for _, path := range []string{"/bytes", "/pubsub/x/service"} {
			head := "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
			resp, held := trickle(t, addr, head, 50*time.Millisecond, limit)
			if !strings.HasPrefix(resp, "HTTP/1.1 400") {
				t.Errorf("%s: answered %q, want 400 from the handler's failed read", path, firstLine(resp))
			}
			if err := <-bodies; err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%s: the handler's read ended with %v, want a deadline", path, err)
			}
			t.Logf("%s: held %s", path, held)
		}
	})

	t.Run("slow handler", func(t *testing.T) {
		resp, err := postOnce("http://"+addr+"/slow", "text/plain", strings.NewReader("short body"))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != "10 bytes" {
			t.Fatalf("got %d %q: the body's deadline reached the handler", resp.StatusCode, got)
		}
		if err := <-bodies; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("fast body", func(t *testing.T) {
		body := bytes.Repeat([]byte("b"), 4<<20) // 4,096 s of allowance at the minimum rate
		resp, err := postOnce("http://"+addr+"/bytes", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("%d bytes", len(body)); string(got) != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		if err := <-bodies; err != nil {
			t.Fatal(err)
		}
	})
}

// TestFrontKeepsWebSockets: the front's timeouts never cut a WebSocket
// session, which is hijacked and long-lived. Messages go back and forth for
// five times the longest timeout, with pauses of twice the shortest.
func TestFrontKeepsWebSockets(t *testing.T) {
	t.Parallel()

	addr, _ := serveFront(t, shortTimeouts, func(c *websocket.Conn) {
		for {
			kind, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(kind, b); err != nil {
				return
			}
		}
	})
	c, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer c.Close()

	pause := 2 * shortTimeouts.ReadHeader
	end := time.Now().Add(5 * shortTimeouts.BodyGrace)
	for i := 0; time.Now().Before(end) || i < 3; i++ {
		// The pause is the silence under test, on a timer, not a wait for
		// anything.
		<-time.After(pause)
		msg := fmt.Sprint("ping ", i)
		if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.ReadMessage()
		if err != nil || string(b) != msg {
			t.Fatalf("message %d: got %q, %v", i, b, err)
		}
	}
}

func firstLine(s string) string {
	l, _, _ := bufio.NewReader(strings.NewReader(s)).ReadLine()
	return string(l)
}

// TestFrontDrainsBeforeClosing: shutdown runs the /pubsub handler's close
// after the port stops accepting and before the connections left are
// dropped, so a session gets its close frame (1001), not a dropped
// connection (1006).
func TestFrontDrainsBeforeClosing(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upgraded := make(chan *websocket.Conn, 1)
	pubsub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		upgraded <- c
	})
	drain := func() error {
		server := <-upgraded
		defer server.Close()
		msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "node shutting down")
		return server.WriteControl(websocket.CloseMessage, msg, time.Now().Add(5*time.Second))
	}
	shutdown := node.ServeFrontDrained(ln, http.NotFoundHandler(), pubsub, drain)
	client, resp, err := websocket.DefaultDialer.Dial("ws://"+ln.Addr().String()+"/pubsub/t", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, _, err = client.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Fatalf("session ended with %v, want close 1001", err)
	}
}
