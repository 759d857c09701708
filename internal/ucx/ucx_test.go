package ucx_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/errkind"
	"github.com/weftccl/weft/internal/ucx"
)

// load opens UCX or skips (fails when WEFT_REQUIRE names ucx).
func load(t *testing.T) *ucx.Lib {
	t.Helper()
	l, err := ucx.Load()
	if err != nil {
		if !errors.Is(err, errkind.ErrNotSupported) {
			t.Fatalf("Load: %v does not wrap ErrNotSupported", err)
		}
		if env.Required("ucx") {
			t.Fatalf("WEFT_REQUIRE names ucx but UCX cannot be loaded: %v", err)
		}
		t.Skipf("UCX not installed (apt-get install libucx0): %v", err)
	}
	return l
}

// wait polls r, progressing both workers, until it completes or 10 s pass.
func wait(t *testing.T, l *ucx.Lib, r *ucx.Request, call string, ws ...*ucx.Worker) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, w := range ws {
			w.Progress()
		}
		done, err := l.Done(r, call)
		if err != nil {
			t.Fatalf("%s: %v", call, err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not complete after 10 s", call)
		}
	}
}

// Two workers of one process: a put through a packed and unpacked remote
// key lands after a flush, and an active message reaches the other
// worker's inbox, over UCX's tcp transport and over its shared memory.
func TestPutFlushAM(t *testing.T) {
	l := load(t)
	for _, tls := range []string{"tcp", "shm"} {
		t.Run(tls, func(t *testing.T) {
			ctx, err := l.NewContext(ucx.FeatureRMA|ucx.FeatureAM|ucx.FeatureWakeup, map[string]string{"TLS": tls + ",self", "NET_DEVICES": "lo"})
			if err != nil {
				t.Fatal(err)
			}
			defer ctx.Close()
			if mt, err := ctx.MemoryTypes(); err != nil || mt&(1<<ucx.MemHost) == 0 {
				t.Fatalf("memory types %#x, %v: want host", mt, err)
			}
			a, err := ctx.NewWorker(7, 1024)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := ctx.NewWorker(7, 1024)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			dst := make([]byte, 4096)
			mem, err := ctx.MemMap(uintptr(unsafe.Pointer(&dst[0])), uint64(len(dst)), ucx.MemHost)
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Unmap()
			rk, err := mem.PackRkey()
			if err != nil || len(rk) == 0 {
				t.Fatalf("PackRkey: %d bytes, %v", len(rk), err)
			}
			addr, err := b.Address()
			if err != nil {
				t.Fatal(err)
			}
			ep, err := a.Connect(addr)
			if err != nil {
				t.Fatal(err)
			}
			k, err := ep.UnpackRkey(rk)
			if err != nil {
				t.Fatal(err)
			}
			src := make([]byte, 1000)
			for i := range src {
				src[i] = byte(i*7 + 1)
			}
			r, err := ep.Put(uintptr(unsafe.Pointer(&src[0])), uint64(len(src)), uint64(uintptr(unsafe.Pointer(&dst[100]))), k)
			if err != nil {
				t.Fatal(err)
			}
			wait(t, l, &r, "put", a, b)
			f, err := ep.Flush()
			if err != nil {
				t.Fatal(err)
			}
			wait(t, l, &f, "flush", a, b)
			if !bytes.Equal(dst[100:1100], src) || dst[99] != 0 || dst[1100] != 0 {
				t.Fatalf("put: the destination does not hold the source at offset 100")
			}
			m, err := ep.SendAM(7, []byte("signal"))
			if err != nil {
				t.Fatal(err)
			}
			wait(t, l, &m, "am", a, b)
			var got []byte
			for deadline := time.Now().Add(10 * time.Second); ; {
				b.Progress()
				if msg, ok := b.PopAM(); ok {
					got = msg
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("active message not received in 10 s")
				}
			}
			if string(got) != "signal" {
				t.Fatalf("active message %q, want %q", got, "signal")
			}
			big, err := ep.SendAM(7, make([]byte, 2000))
			if err != nil {
				t.Fatal(err)
			}
			wait(t, l, &big, "am", a, b)
			for deadline := time.Now().Add(10 * time.Second); b.Dropped() == 0; {
				b.Progress()
				if time.Now().After(deadline) {
					t.Fatal("a message beyond the inbox's limit was not dropped")
				}
			}
			if _, ok := b.PopAM(); ok {
				t.Fatal("a message beyond the inbox's limit was kept")
			}
			k.Destroy()
			c, err := ep.Close(false)
			if err != nil {
				t.Fatal(err)
			}
			wait(t, l, &c, "close", a, b)
		})
	}
}

// A failed call names the call and maps the status to an error kind.
func TestErrors(t *testing.T) {
	l := load(t)
	ctx, err := l.NewContext(ucx.FeatureRMA|ucx.FeatureAM|ucx.FeatureWakeup, map[string]string{"RNDV_THRESH": "not-a-size"})
	if err == nil {
		ctx.Close()
		t.Fatal("a malformed UCX setting was accepted")
	}
	var ue *ucx.Error
	if !errors.As(err, &ue) || ue.Call == "" || ue.Text == "" {
		t.Fatalf("error %v is not a *ucx.Error with call and text", err)
	}
	if _, err := (&ucx.Worker{}).Connect(nil); err == nil || !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Fatalf("Connect(nil): %v, want ErrInvalidArgument", err)
	}
	if !ucx.IsPeerFailure(-25) || ucx.IsPeerFailure(-4) {
		t.Fatal("IsPeerFailure: connection reset is a peer failure, no memory is not")
	}
}

// A library that is not there is a *LoadError that says "not found" and
// wraps ErrNotSupported (what Probe reports on a machine without UCX).
func TestOpenMissing(t *testing.T) {
	_, err := ucx.Open("libucp-weft-missing.so.0", ucx.DefaultUCS)
	var le *ucx.LoadError
	if !errors.As(err, &le) || !errors.Is(err, errkind.ErrNotSupported) || !strings.Contains(err.Error(), "libucp-weft-missing.so.0 not found") {
		t.Fatalf("Open of a missing library: %v, want a *LoadError naming it, wrapping ErrNotSupported", err)
	}
}
