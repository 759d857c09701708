//go:build cgo

package ncclnet_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal/netplugin/netplugintest"
	"github.com/weftccl/weft/internal/errkind"
	"github.com/weftccl/weft/internal/ncclnet"
)

// Load says why a plugin is unusable: every name it tried, or the table
// that is missing.
func TestLoadErrors(t *testing.T) {
	_, err := ncclnet.Load("no-such-plugin-xyz")
	var le *ncclnet.LoadError
	if !errors.As(err, &le) || !errors.Is(err, errkind.ErrNotSupported) {
		t.Fatalf("Load(missing) = %v, want a *LoadError", err)
	}
	for _, name := range []string{"no-such-plugin-xyz", "libnccl-net-no-such-plugin-xyz.so"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("Load(missing) = %v, want it to name %s", err, name)
		}
	}
	if _, err := ncclnet.Load("libc.so.6"); err == nil || !strings.Contains(err.Error(), "no symbol ncclNetPlugin_v8") {
		t.Errorf("Load(libc) = %v, want the missing table named", err)
	}
	if _, err := ncclnet.Load(""); !errors.As(err, &le) {
		t.Errorf("Load(\"\") = %v, want a *LoadError", err)
	}
}

// The binding drives a plugin through the whole v8 cycle: properties,
// listen, non-blocking connect and accept, registration, isend and irecv
// with sizes, test, close.
func TestRoundTrip(t *testing.T) {
	p, err := ncclnet.Load(netplugintest.Build(t))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "weftest" {
		t.Errorf("Name() = %q, want weftest", p.Name())
	}
	if n, err := p.Devices(); err != nil || n != 1 {
		t.Fatalf("Devices() = %d, %v; want 1", n, err)
	}
	pr, err := p.Properties(0)
	if err != nil || pr.Name != "weftest0" || pr.PtrSupport != ncclnet.PtrHost || pr.SpeedMbps != 10000 {
		t.Fatalf("Properties(0) = %+v, %v", pr, err)
	}
	l, h, err := p.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var (
		s *ncclnet.SendComm
		r *ncclnet.RecvComm
	)
	d := p.Dial(0, h)
	defer d.Free()
	deadline := time.Now().Add(10 * time.Second)
	for (s == nil || r == nil) && time.Now().Before(deadline) {
		if s == nil {
			if s, err = d.Connect(); err != nil {
				t.Fatal(err)
			}
		}
		if r == nil {
			if r, err = l.Accept(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s == nil || r == nil {
		t.Fatal("connect/accept did not complete within 10 s")
	}
	defer s.Close()
	defer r.Close()
	src := bytes.Repeat([]byte("weft"), 1000)
	dst := make([]byte, 8192)
	smr, err := s.RegMr(addr(src), len(src), ncclnet.PtrHost)
	if err != nil {
		t.Fatal(err)
	}
	defer smr.Dereg()
	rmr, err := r.RegMr(addr(dst), len(dst), ncclnet.PtrHost)
	if err != nil {
		t.Fatal(err)
	}
	defer rmr.Dereg()
	if _, err := r.RegMr(addr(dst), len(dst), ncclnet.PtrCUDA); err == nil {
		t.Error("a host-only plugin registered CUDA memory")
	}
	rq, err := r.IRecv(addr(dst), len(dst), 0, rmr)
	if err != nil || rq == nil {
		t.Fatalf("IRecv = %v, %v", rq, err)
	}
	sq, err := s.ISend(addr(src), len(src), 0, smr)
	if err != nil || sq == nil {
		t.Fatalf("ISend = %v, %v", sq, err)
	}
	sdone, rdone, got := false, false, 0
	for (!sdone || !rdone) && time.Now().Before(deadline) {
		if !sdone {
			if sdone, _, err = sq.Test(); err != nil {
				t.Fatal(err)
			}
		}
		if !rdone {
			if rdone, got, err = rq.Test(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !sdone || !rdone {
		t.Fatal("the message did not complete within 10 s")
	}
	if q, err := r.IFlush(addr(dst), got, rmr); err != nil || q != nil {
		t.Errorf("IFlush of host memory = %v, %v; want no request (nothing to flush)", q, err)
	}
	if got != len(src) || !bytes.Equal(dst[:got], src) {
		t.Errorf("received %d bytes (%q…), want the %d sent", got, dst[:min(got, 8)], len(src))
	}
}

func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }
