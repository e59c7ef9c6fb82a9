package redisstore_test

// A TCP proxy that delays Redis's replies, to play a slow or hung server.

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// delayProxy forwards loopback connections to a Redis server, holding back
// each chunk of the server's replies for the current delay.
type delayProxy struct {
	ln       net.Listener
	upstream string
	delay    atomic.Int64 // nanoseconds
	done     chan struct{}
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

// startProxy runs a proxy to upstream, closed when t ends.
func startProxy(t testing.TB, upstream string) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{ln: ln, upstream: upstream, done: make(chan struct{})}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

func (p *delayProxy) addr() string { return p.ln.Addr().String() }

// setDelay delays every reply chunk from now on by d.
func (p *delayProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *delayProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(u, c); u.Close() })
		p.wg.Go(func() { p.copyDelayed(c, u); c.Close() })
	}
}

// copyDelayed copies src to dst, each chunk after the delay.
func (p *delayProxy) copyDelayed(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				// Simulated network latency: the test is of the
				// store's timeout, not of time logic.
				tm := time.NewTimer(d)
				select {
				case <-tm.C:
				case <-p.done:
					tm.Stop()
					return
				}
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *delayProxy) close() {
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
