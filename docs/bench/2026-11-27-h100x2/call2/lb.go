//go:build ignore

// lb: a ping-pong of 160-byte messages over loopback TCP between two goroutines locked to OS
// threads, the receiver polling (call 2 of docs/bench/2026-11-27-h100x2). Modes: net (net.Conn
// Write/Read, the receiver peeking with MSG_DONTWAIT first, as hal/socket spins), netdl (the
// same with a deadline before every write and read and the write as net.Buffers, hal/socket's
// pattern), raw (the descriptors detached from Go's netpoller: non-blocking read/write syscalls).
// go build -o lb docs/bench/2026-11-27-h100x2/call2/lb.go && ./lb raw

package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"syscall"
	"time"
)

// ping-pong of 160-byte messages over loopback TCP; the receiver spins with MSG_PEEK|DONTWAIT.
// mode net: net.Conn Write / Read (netpoll-registered fds); raw: dup'd fds detached from netpoll.
func pair() (a, b *net.TCPConn) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ch := make(chan net.Conn)
	go func() { c, _ := ln.Accept(); ch <- c }()
	c, _ := net.Dial("tcp", ln.Addr().String())
	s := <-ch
	ln.Close()
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func detach(c *net.TCPConn) int {
	f, err := c.File()
	if err != nil {
		panic(err)
	}
	c.Close()
	fd := int(f.Fd())
	nfd, _ := syscall.Dup(fd)
	f.Close()
	syscall.SetNonblock(nfd, true)
	return nfd
}

type side struct {
	dl  bool
	raw bool
	c   *net.TCPConn
	fd  int
}

func (s side) write(b []byte) {
	if s.raw {
		for off := 0; off < len(b); {
			n, err := syscall.Write(s.fd, b[off:])
			if err == syscall.EAGAIN {
				continue
			}
			if err != nil {
				panic(err)
			}
			off += n
		}
		return
	}
	if s.dl {
		s.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		bufs := net.Buffers{b[:32], b[32:]}
		if _, err := bufs.WriteTo(s.c); err != nil {
			panic(err)
		}
		return
	}
	if _, err := s.c.Write(b); err != nil {
		panic(err)
	}
}

func (s side) read(b []byte) {
	for off := 0; off < len(b); {
		var n int
		var err error
		if s.raw {
			n, err = syscall.Read(s.fd, b[off:])
			if err == syscall.EAGAIN {
				continue
			}
		} else {
			// spin with peek first, as hal/socket does
			rc, _ := s.c.SyscallConn()
			var one [1]byte
			for {
				ready := false
				rc.Read(func(fd uintptr) bool {
					k, _, e := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
					ready = k > 0 || e != syscall.EAGAIN
					return true
				})
				if ready {
					break
				}
			}
			if s.dl {
				s.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			}
			n, err = s.c.Read(b[off:])
		}
		if err != nil {
			panic(err)
		}
		off += n
	}
}

func main() {
	mode := os.Args[1]
	a, b := pair()
	a.SetNoDelay(true)
	b.SetNoDelay(true)
	sa, sb := side{c: a}, side{c: b}
	if mode == "netdl" {
		sa.dl, sb.dl = true, true
	}
	if mode == "raw" {
		sa = side{raw: true, fd: detach(a)}
		sb = side{raw: true, fd: detach(b)}
	}
	const n, size = 20000, 160
	done := make(chan bool)
	go func() {
		runtime.LockOSThread()
		buf := make([]byte, size)
		for i := 0; i < n; i++ {
			sb.read(buf)
			sb.write(buf)
		}
		done <- true
	}()
	runtime.LockOSThread()
	buf := make([]byte, size)
	var w []time.Duration
	t0 := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		sa.write(buf)
		w = append(w, time.Since(t))
		sa.read(buf)
	}
	el := time.Since(t0)
	<-done
	sort.Slice(w, func(i, j int) bool { return w[i] < w[j] })
	fmt.Printf("%s: one-way %.2f µs, write p50 %.2f µs p90 %.2f\n", mode, float64(el.Microseconds())/float64(2*n), float64(w[n/2].Nanoseconds())/1e3, float64(w[n*9/10].Nanoseconds())/1e3)
}
