//go:build ignore

// lb2: the floors of loopback TCP for the shapes weft's socket transport uses (call 1 of
// docs/bench/2026-11-27l-h100x2). Two goroutines locked to OS threads, descriptors out of Go's
// netpoller (non-blocking read/write, readers spinning), 200-byte messages (a 64 B LL put's
// frame). Modes:
//
//	pp-bi   ping-pong on one connection (both directions share it: ACKs ride on data)
//	pp-uni  ping-pong, each direction on its own connection (weft's and NCCL's shape)
//	ex-uni  exchange: both sides write, then read the other's message (a 2-rank AllGather)
//	ex-bi   the exchange on one connection
//
// A mode ending in "-qa0" sets TCP_QUICKACK to 0 on the read side before each message's read
// (delayed-ACK "pingpong" mode: a receive-only connection otherwise ACKs every small segment from
// the reader's read call). A mode ending in "-peek" reads each message with MSG_PEEK and consumes
// it (recv with MSG_TRUNC, which discards) only at the start of the next read: the ACK that a
// consuming read of a drained queue sends then goes after the message has been used.
// go build -o lb2 lb2.go && ./lb2 ex-uni 20000
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func pair() (a, b int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ch := make(chan net.Conn)
	go func() { c, _ := ln.Accept(); ch <- c }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	s := <-ch
	ln.Close()
	return detach(c.(*net.TCPConn)), detach(s.(*net.TCPConn))
}

func detach(c *net.TCPConn) int {
	f, err := c.File()
	if err != nil {
		panic(err)
	}
	c.Close()
	fd, _ := syscall.Dup(int(f.Fd()))
	f.Close()
	syscall.SetNonblock(fd, true)
	return fd
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
		if err != nil || n == 0 {
			panic(fmt.Sprint("read ", err))
		}
		off += n
	}
}

func main() {
	mode := os.Args[1]
	iters, _ := strconv.Atoi(os.Args[2])
	const size = 200
	// fds[side] = (write fd, read fd)
	var wa, ra, wb, rb int
	switch strings.TrimSuffix(strings.TrimSuffix(mode, "-peek"), "-qa0") {
	case "pp-bi", "ex-bi":
		x, y := pair()
		wa, ra, wb, rb = x, x, y, y
	default:
		x1, y1 := pair() // a -> b
		x2, y2 := pair() // b -> a
		wa, rb, wb, ra = x1, y1, x2, y2
	}
	pingpong := mode[:2] == "pp"
	peek := strings.HasSuffix(mode, "-peek")
	mode = strings.TrimSuffix(mode, "-peek")
	qa0 := strings.HasSuffix(mode, "-qa0")
	mode = strings.TrimSuffix(mode, "-qa0")
	done := make(chan []time.Duration)
	run := func(w, r int, first bool) {
		runtime.LockOSThread()
		buf := make([]byte, size)
		var writes []time.Duration
		pending := 0
		rd := func() {
			if qa0 {
				syscall.SetsockoptInt(r, syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 0)
			}
			if !peek {
				read(r, buf)
				return
			}
			if pending > 0 {
				if n, _, err := syscall.Recvfrom(r, buf[:pending], syscall.MSG_TRUNC|syscall.MSG_DONTWAIT); n != pending {
					panic(fmt.Sprint("discard ", n, err))
				}
			}
			for {
				n, _, err := syscall.Recvfrom(r, buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				if err == syscall.EAGAIN || (err == nil && n > 0 && n < len(buf)) {
					continue
				}
				if err != nil || n == 0 {
					panic(fmt.Sprint("peek ", err))
				}
				break
			}
			pending = len(buf)
		}
		for i := 0; i < iters; i++ {
			if pingpong && !first {
				rd()
			}
			t := time.Now()
			write(w, buf)
			writes = append(writes, time.Since(t))
			if !pingpong || first {
				rd()
			}
		}
		done <- writes
	}
	go run(wb, rb, false)
	start := time.Now()
	go run(wa, ra, true)
	w1 := <-done
	el := time.Since(start)
	<-done
	sort.Slice(w1, func(i, j int) bool { return w1[i] < w1[j] })
	per := float64(el.Nanoseconds()) / 1e3 / float64(iters)
	what := "round"
	if pingpong {
		per /= 2
		what = "one-way"
	}
	if qa0 {
		mode += "-qa0"
	}
	if peek {
		mode += "-peek"
	}
	fmt.Printf("%s: %s %.2f µs, write p50 %.2f µs p90 %.2f\n", mode, what, per,
		float64(w1[len(w1)/2].Nanoseconds())/1e3, float64(w1[len(w1)*9/10].Nanoseconds())/1e3)
}
