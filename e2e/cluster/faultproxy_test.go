package cluster

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// faultProxy is a TCP proxy between the scheduler pods (kube-scheduler and the extender) and
// kube-apiserver: TLS passes through it untouched, so the clients verify the API server's own
// certificate (it names 127.0.0.1). With no delay set it only forwards; setDelay holds every
// byte the API server sends for that long before it reaches the client, which is what a
// saturated API server or a congested load balancer looks like from the client: requests go
// out, answers come back late, and a watch's events arrive late but in order.
type faultProxy struct {
	listener net.Listener
	target   string
	delayNs  atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
}

func startFaultProxy(target string) (*faultProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{listener: l, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *faultProxy) addr() string { return p.listener.Addr().String() }

// setDelay applies to the bytes the API server sends from now on; bytes already queued keep
// the delay they were read under, so the stream's order never changes.
func (p *faultProxy) setDelay(d time.Duration) { p.delayNs.Store(int64(d)) }

func (p *faultProxy) close() {
	if p == nil {
		return
	}
	p.listener.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *faultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *faultProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve forwards one connection both ways until either side ends it, then closes both.
func (p *faultProxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		client.Close()
		return
	}
	defer p.untrack(client)
	server, err := net.DialTimeout("tcp", p.target, 3*time.Second)
	if err != nil {
		return // the API server is down: the client sees its connection closed, as with no proxy
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(server, client)
		done <- struct{}{}
	}()
	go func() {
		p.copyDelayed(client, server)
		done <- struct{}{}
	}()
	<-done // either direction ended: end the connection (the deferred untracks close both)
}

// copyDelayed copies src to dst, each chunk written no earlier than the delay in force when it
// was read. The reader never waits for the writer (an unbounded queue), so a delay does not
// slow the API server's side, only what the client receives.
func (p *faultProxy) copyDelayed(dst, src net.Conn) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	var mu sync.Mutex
	var queue []chunk
	var readDone bool
	ready := make(chan struct{}, 1)
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			mu.Lock()
			if n > 0 {
				queue = append(queue, chunk{buf[:n], time.Now().Add(time.Duration(p.delayNs.Load()))})
			}
			if err != nil {
				readDone = true
			}
			mu.Unlock()
			select {
			case ready <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		mu.Lock()
		if len(queue) == 0 {
			finished := readDone
			mu.Unlock()
			if finished {
				return
			}
			<-ready
			continue
		}
		next := queue[0]
		queue = queue[1:]
		mu.Unlock()
		time.Sleep(time.Until(next.due))
		if _, err := dst.Write(next.data); err != nil {
			src.Close() // ends the reader
			return
		}
	}
}
