package socket

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
)

// untilError repeats op until it fails or failBound passes, and returns
// the error and how long it took.
func untilError(t *testing.T, op func() error) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < failBound {
		if err := op(); err != nil {
			return err, time.Since(start)
		}
	}
	t.Fatalf("no error within %v", failBound)
	return nil, 0
}

// TestPeerLostInProcess streams puts from rank 0 to rank 1 and, in the
// middle, drops everything of rank 1 without a goodbye (as a crash
// would). Rank 0's engine must fail naming rank 1, and rank 0's receiver
// (fed by rank 1's engine) must record rank 1's loss.
func TestPeerLostInProcess(t *testing.T) {
	const n = 1 << 20
	rs := openRanks(t, 2, semArea+n, n, Options{Conns: 2, Chunk: 64 << 10})
	s, d := rs[0], rs[1]
	e := s.eng[1]
	// Rank 1 streams too, so that rank 0's receiver is mid-transfer.
	go func() {
		for i := 0; ; i++ {
			if err := d.eng[0].Put(d.remote[0].Addr()+semArea, d.src.Addr(), n); err != nil {
				return
			}
			if err := d.eng[0].Signal(d.remote[0].Addr()+semOff, 0, 0); err != nil {
				return
			}
		}
	}()
	put := func() error {
		if err := e.Put(s.remote[1].Addr()+semArea, s.src.Addr(), n); err != nil {
			return err
		}
		return e.Signal(s.remote[1].Addr()+semOff, 0, 0)
	}
	for range 4 {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	waitWord(t, d.win, semOff, 2, nil)
	d.nd.abort()
	err, took := untilError(t, func() error {
		if err := put(); err != nil {
			return err
		}
		_, err := e.Completed()
		return err
	})
	errorMentions(t, err, nil, "rank 1")
	if !errors.Is(err, hal.ErrRemote) && !errors.Is(err, hal.ErrTimeout) {
		t.Errorf("err = %v, want ErrRemote or ErrTimeout", err)
	}
	t.Logf("rank 0's engine failed %v after rank 1 dropped out: %v", took.Round(time.Millisecond), err)
	deadline := time.Now().Add(failBound)
	for s.nd.PeerErr(1) == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	errorMentions(t, s.nd.PeerErr(1), nil, "rank 1")
	// Close reports the failure (once).
	errorMentions(t, e.Close(), nil, "rank 1")
	s.eng[1] = nil
}

// TestStalledPeerTimesOut stops a receiver from reading (its connections
// stay open): the sender's writes make no progress, and the engine fails
// within the timeout naming the peer.
func TestStalledPeerTimesOut(t *testing.T) {
	const n = 8 << 20
	rs := openRanks(t, 2, semArea+n, n, Options{Conns: 1, Chunk: 1 << 20, Timeout: 500 * time.Millisecond,
		hooks: &testHooks{}})
	s, d := rs[0], rs[1]
	// Freeze rank 1's receiving: hold its session's lock so that its
	// reader stops after the first frame (the kernel buffers fill up).
	e := s.eng[1]
	if err := e.Put(s.remote[1].Addr()+semArea, s.src.Addr(), 8); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(s.remote[1].Addr()+semOff, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, d.win, semOff, 1, nil)
	d.nd.mu.Lock()
	var sess *session
	for _, x := range d.nd.sessions {
		if x.key.src == 0 {
			sess = x
		}
	}
	d.nd.mu.Unlock()
	if sess == nil {
		t.Fatal("no session of rank 0 at rank 1")
	}
	sess.mu.Lock()
	unfrozen := false
	defer func() {
		if !unfrozen {
			sess.mu.Unlock()
		}
	}()
	err, _ := untilError(t, func() error {
		if err := e.Put(s.remote[1].Addr()+semArea, s.src.Addr(), n); err != nil {
			return err
		}
		_, err := e.Completed()
		return err
	})
	unfrozen = true
	sess.mu.Unlock()
	errorMentions(t, err, hal.ErrTimeout, "rank 1", "within 500ms")
}

// Cross-process tests: the test binary re-executes itself as rank 1.

const childEnv = "WEFT_SOCKET_TEST_CHILD"

// TestHelperProcess is rank 1 when the test binary runs as a child;
// otherwise it does nothing.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return
	}
	if err := child(mode); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// child is rank 1: it prints its address and handle, reads rank 0's, and
// then either echoes what rank 0 put (echo) or streams puts until killed
// (stream).
func child(mode string) error {
	job := os.Getenv("WEFT_SOCKET_TEST_JOB")
	size, _ := strconv.Atoi(os.Getenv("WEFT_SOCKET_TEST_SIZE"))
	dev, err := hal.Open("host", hal.Config{Rank: 1, JobID: job})
	if err != nil {
		return err
	}
	nd, err := Open(dev, hal.NetConfig{Rank: 1, NRanks: 2, JobID: job}, Options{IfName: "lo"})
	if err != nil {
		return err
	}
	win, err := dev.Alloc(int64(semArea + size))
	if err != nil {
		return err
	}
	h, err := nd.ExportPort(win)
	if err != nil {
		return err
	}
	fmt.Printf("ADDR %x\nHANDLE %x\n", nd.Address(), []byte(h))
	in := bufio.NewScanner(os.Stdin)
	peerAddr, peerHandle, err := readPeer(in)
	if err != nil {
		return err
	}
	remote, err := nd.ImportPort(peerHandle)
	if err != nil {
		return err
	}
	e, err := nd.NewEngine(hal.Endpoint{Backend: "host", Net: map[string][]byte{Name: peerAddr}})
	if err != nil {
		return err
	}
	switch mode {
	case "echo":
		deadline := time.Now().Add(failBound)
		for atomic.LoadUint64(word(win, semOff)) < 1 {
			if time.Now().After(deadline) {
				return fmt.Errorf("no signal from rank 0 within %v", failBound)
			}
			time.Sleep(100 * time.Microsecond)
		}
		if err := e.Put(remote.Addr()+semArea, win.Addr()+semArea, int64(size)); err != nil {
			return err
		}
		if err := e.Signal(remote.Addr()+semOff, 0, 0); err != nil {
			return err
		}
		in.Scan() // BYE, or EOF
		if err := e.Close(); err != nil {
			return err
		}
		if err := nd.Close(); err != nil {
			return err
		}
		return nil
	case "stream":
		for {
			if err := e.Put(remote.Addr()+semArea, win.Addr()+semArea, int64(size)); err != nil {
				return err
			}
			if err := e.Signal(remote.Addr()+semOff, 0, 0); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func readPeer(in *bufio.Scanner) (addr, handle []byte, err error) {
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 2 {
			continue
		}
		b, err := hex.DecodeString(f[1])
		if err != nil {
			return nil, nil, err
		}
		switch f[0] {
		case "ADDR":
			addr = b
		case "HANDLE":
			handle = b
		}
		if addr != nil && handle != nil {
			return addr, handle, nil
		}
	}
	return nil, nil, fmt.Errorf("peer's address and handle not received: %v", in.Err())
}

// parent is rank 0 of a cross-process test.
type parent struct {
	dev    hal.Device
	nd     *NetDevice
	win    hal.Buffer
	src    hal.Buffer
	remote hal.Buffer
	e      hal.Engine
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
}

func startParent(t *testing.T, mode string, size int) *parent {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	job := newJob()
	p := &parent{stderr: &bytes.Buffer{}}
	if p.dev, err = hal.Open("host", hal.Config{JobID: job}); err != nil {
		t.Fatal(err)
	}
	if p.nd, err = Open(p.dev, hal.NetConfig{Rank: 0, NRanks: 2, JobID: job}, Options{IfName: "lo"}); err != nil {
		t.Fatal(err)
	}
	if p.win, err = p.dev.Alloc(int64(semArea + size)); err != nil {
		t.Fatal(err)
	}
	if p.src, err = p.dev.Alloc(int64(size)); err != nil {
		t.Fatal(err)
	}
	h, err := p.nd.ExportPort(p.win)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(exe, "-test.run=^TestHelperProcess$")
	p.cmd.Env = append(os.Environ(), childEnv+"="+mode, "WEFT_SOCKET_TEST_JOB="+job, fmt.Sprintf("WEFT_SOCKET_TEST_SIZE=%d", size))
	p.cmd.Stderr = p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		if p.e != nil {
			p.e.Close()
		}
		p.nd.Close()
		p.remote.Free()
		p.win.Free()
		p.src.Free()
		p.dev.Close()
	})
	fmt.Fprintf(p.stdin, "ADDR %x\nHANDLE %x\n", p.nd.Address(), []byte(h))
	addr, hb, err := readPeer(bufio.NewScanner(out))
	if err != nil {
		t.Fatalf("%v; child's stderr:\n%s", err, p.stderr)
	}
	go io.Copy(io.Discard, out)
	if p.remote, err = p.nd.ImportPort(hb); err != nil {
		t.Fatal(err)
	}
	if p.e, err = p.nd.NewEngine(hal.Endpoint{Backend: "host", Net: map[string][]byte{Name: addr}}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCrossProcessEcho puts 5 MiB + 3 bytes into a child process's window
// over two connections; the child puts them back; both directions must be
// exact, and both sides close cleanly.
func TestCrossProcessEcho(t *testing.T) {
	const size = 5<<20 + 3
	p := startParent(t, "echo", size)
	fill(p.src.Host(), 42)
	if err := p.e.Put(p.remote.Addr()+semArea, p.src.Addr(), size); err != nil {
		t.Fatal(err)
	}
	if err := p.e.Signal(p.remote.Addr()+semOff, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, p.win, semOff, 1, p.nd.Err)
	if !bytes.Equal(p.win.Host()[semArea:semArea+size], p.src.Host()[:size]) {
		t.Fatalf("the echo from the child process differs from what was sent")
	}
	if err := p.e.Close(); err != nil {
		t.Fatal(err)
	}
	p.e = nil
	fmt.Fprintln(p.stdin, "BYE")
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("child: %v; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(failBound):
		t.Fatalf("child did not exit within %v; stderr:\n%s", failBound, p.stderr)
	}
	if err := p.nd.Err(); err != nil {
		t.Errorf("a clean exchange left an error: %v", err)
	}
}

// TestCrossProcessPeerKilled kills the child while both directions
// stream: the parent's engine must fail naming rank 1, and its receiver
// must record rank 1's loss.
func TestCrossProcessPeerKilled(t *testing.T) {
	const size = 1 << 20
	p := startParent(t, "stream", size)
	put := func() error {
		if err := p.e.Put(p.remote.Addr()+semArea, p.src.Addr(), size); err != nil {
			return err
		}
		return p.e.Signal(p.remote.Addr()+semOff, 0, 0)
	}
	for range 3 {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	waitWord(t, p.win, semOff, 2, p.nd.Err) // the child's stream arrives
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err, took := untilError(t, func() error {
		if err := put(); err != nil {
			return err
		}
		_, err := p.e.Completed()
		return err
	})
	errorMentions(t, err, nil, "rank 1")
	t.Logf("the engine failed %v after the kill: %v", took.Round(time.Millisecond), err)
	deadline := time.Now().Add(failBound)
	for p.nd.PeerErr(1) == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	errorMentions(t, p.nd.PeerErr(1), nil, "rank 1")
	t.Logf("receiver: %v", p.nd.PeerErr(1))
}
