//go:build ignore

// lb: what spinning goroutines do to one TCP hop on loopback (call 1 of
// docs/bench/2026-11-27j-h100x2). A ping-pong of 160-byte messages between two goroutines locked
// to OS threads over descriptors taken out of Go's netpoller (non-blocking read/write, the
// reader polling), as hal/socket moves frames, with K more goroutines polling an atomic word
// beside them, as weft's proxy and transports' loops poll:
//
//	lb quiet              no pollers
//	lb gosched K          K pollers, runtime.Gosched after every 64 polls (the proxy's hot loop before)
//	lb rare K             K pollers, runtime.Gosched at most once per 50 µs (internal/spin)
//	lb bidir              no pollers; both sides write, then read (an all_gather's shape)
//
// go build -o lb lb.go && ./lb gosched 4
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

func pair() (int, int) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ch := make(chan net.Conn)
	go func() { c, _ := ln.Accept(); ch <- c }()
	c, _ := net.Dial("tcp", ln.Addr().String())
	s := <-ch
	ln.Close()
	return detach(c.(*net.TCPConn)), detach(s.(*net.TCPConn))
}

func detach(c *net.TCPConn) int {
	c.SetNoDelay(true)
	f, err := c.File()
	if err != nil {
		panic(err)
	}
	c.Close()
	nfd, _ := syscall.Dup(int(f.Fd()))
	f.Close()
	syscall.SetNonblock(nfd, true)
	return nfd
}

func write(fd int, b []byte) {
	for off := 0; off < len(b); {
		n, err := syscall.Write(fd, b[off:])
		if err == syscall.EAGAIN {
			continue
		}
		if err != nil {
			panic(err)
		}
		off += n
	}
}

func read(fd int, b []byte) {
	for off := 0; off < len(b); {
		n, err := syscall.Read(fd, b[off:])
		if err == syscall.EAGAIN {
			continue
		}
		if err != nil {
			panic(err)
		}
		off += n
	}
}

var word atomic.Uint64
var stop atomic.Bool

// poller polls word as the proxy polls its FIFO, yielding after every 64
// polls (rare: at most once per 50 µs).
func poller(rare bool) {
	last := time.Now()
	for i := 0; !stop.Load(); i++ {
		if word.Load() == 1<<63 {
			panic("unreachable")
		}
		if i%64 != 63 {
			continue
		}
		now := time.Now()
		if rare && now.Sub(last) < 50*time.Microsecond {
			continue
		}
		last = now
		runtime.Gosched()
	}
}

func main() {
	mode := os.Args[1]
	k := 0
	if len(os.Args) > 2 {
		k, _ = strconv.Atoi(os.Args[2])
	}
	for i := 0; i < k; i++ {
		go poller(mode == "rare")
	}
	a1, b1 := pair() // a→b
	a2, b2 := pair() // b→a (bidir)
	const n, size = 20000, 160
	done := make(chan bool)
	go func() {
		runtime.LockOSThread()
		buf := make([]byte, size)
		for i := 0; i < n; i++ {
			if mode == "bidir" {
				write(a2, buf)
				read(b1, buf)
			} else {
				read(b1, buf)
				write(b1, buf)
			}
		}
		done <- true
	}()
	runtime.LockOSThread()
	buf := make([]byte, size)
	var w []time.Duration
	t0 := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		write(a1, buf)
		w = append(w, time.Since(t))
		if mode == "bidir" {
			read(b2, buf)
		} else {
			read(a1, buf)
		}
	}
	el := time.Since(t0)
	<-done
	stop.Store(true)
	sort.Slice(w, func(i, j int) bool { return w[i] < w[j] })
	per := float64(el.Nanoseconds()) / 1e3 / float64(2*n)
	if mode == "bidir" {
		per = float64(el.Nanoseconds()) / 1e3 / float64(n) // a cycle: both write, both read
	}
	fmt.Printf("%-8s K=%d: %s %.2f µs, write p50 %.2f µs p90 %.2f\n", mode, k, map[bool]string{true: "cycle", false: "one-way"}[mode == "bidir"], per,
		float64(w[n/2].Nanoseconds())/1e3, float64(w[n*9/10].Nanoseconds())/1e3)
}
