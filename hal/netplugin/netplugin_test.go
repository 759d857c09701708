package netplugin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/ncclnet"
)

// The probe says why the network cannot run: no plugin named, a plugin
// that does not load, a plugin without devices; and what it found when it
// can.
func TestProbe(t *testing.T) {
	lib := plugin(t)
	for _, c := range []struct {
		name, plugin, ndev string
		avail              bool
		reason             string
	}{
		{"unset", "", "", false, "NCCL_NET_PLUGIN unset"},
		{"missing", "no-such-plugin-xyz", "", false, `cannot load NCCL net plugin "no-such-plugin-xyz": `},
		{"missing-renamed", "no-such-plugin-xyz", "", false, "libnccl-net-no-such-plugin-xyz.so"},
		{"no-table", "libc.so.6", "", false, "no symbol ncclNetPlugin_v8"},
		{"no-devices", lib, "0", false, "reports 0 devices"},
		{"ok", lib, "1", true, "net plugin weftest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(PluginVar, c.plugin)
			t.Setenv("WEFTEST_NDEV", c.ndev)
			a := network{}.Probe()
			if a.Available != c.avail || !strings.Contains(a.Reason, c.reason) {
				t.Errorf("Probe() = %+v, want available %v and a reason containing %q", a, c.avail, c.reason)
			}
		})
	}
	if _, err := Open(nil, hal.NetConfig{NRanks: 1}, Options{}); !errors.Is(err, hal.ErrNotSupported) || !strings.Contains(err.Error(), "NCCL_NET_PLUGIN unset") {
		t.Errorf("Open without a plugin: %v, want ErrNotSupported naming NCCL_NET_PLUGIN", err)
	}
}

// Puts of many chunks and the signal after them arrive in order: every
// round the receiver sees the semaphore only after all of that round's
// bytes, in both directions at once, with few slots so that messages
// queue. Each round has its own region of the window, and the source is
// rewritten every round once the engine says it is complete at the
// source (flush).
func TestPutSignalOrder(t *testing.T) {
	t.Parallel()
	const (
		rounds = 12
		size   = 3*MinChunk + 120 // four messages per put
		semOff = rounds * size
	)
	rs := openRanks(t, 2, semOff+64, size, Options{Chunk: MinChunk, SendSlots: 2, RecvSlots: 2}, nil, true)
	errc := make(chan error, 2)
	for _, x := range rs {
		go func() {
			p := 1 - x.r
			e := x.eng[p]
			var err error
			for k := 0; k < rounds && err == nil; k++ {
				fill(x.src.Host(), uint64(100*x.r+k))
				if err = e.Put(x.remote[p].Addr()+uint64(k*size), x.src.Addr(), size); err != nil {
					break
				}
				if err = e.Signal(x.remote[p].Addr()+semOff, 0, 0); err != nil {
					break
				}
				var tk uint64
				if tk, err = e.Mark(); err != nil {
					break
				}
				err = hal.AwaitTicket(e, tk, deadline())
			}
			errc <- err
		}()
	}
	for _, x := range rs {
		p := 1 - x.r
		want := make([]byte, size)
		for k := 0; k < rounds; k++ {
			waitWord(t, x.win, semOff, uint64(k+1), x.nd.Err)
			fill(want, uint64(100*p+k))
			if got := x.win.Host()[k*size : (k+1)*size]; !bytes.Equal(got, want) {
				t.Fatalf("rank %d, round %d: the semaphore reached %d before the round's %d bytes arrived", x.r, k, k+1, size)
			}
		}
	}
	for range rs {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// A signal with a count word stores the count before the semaphore; a
// Copy before a Signal has finished when the peer sees the signal.
func TestSignalCountAndCopy(t *testing.T) {
	t.Parallel()
	rs := openRanks(t, 2, 4096, 4096, Options{}, nil, true)
	a, b := rs[0], rs[1]
	e := a.eng[1]
	fill(a.src.Host()[:512], 7)
	// Copy src[0:512] to src[1024:1536] locally, then put that copy.
	if err := e.Copy(a.src.Addr()+1024, a.src.Addr(), 512); err != nil {
		t.Fatal(err)
	}
	if err := e.Put(a.remote[1].Addr(), a.src.Addr()+1024, 512); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(a.remote[1].Addr()+4000-8, a.remote[1].Addr()+2048, 42); err != nil {
		t.Fatal(err)
	}
	waitWord(t, b.win, 4000-8, 1, b.nd.Err)
	if got := *word(b.win, 2048); got != 42 {
		t.Errorf("count word = %d, want 42", got)
	}
	if !bytes.Equal(b.win.Host()[:512], a.src.Host()[:512]) {
		t.Error("the put of the copied bytes did not carry them")
	}
}

// An engine refuses addresses outside what it imported at once; the
// receiver refuses a message whose header names bytes outside its
// registration (a hook rewrites it after the sender's checks) and
// records the sending rank's failure, and the sender's engine fails with
// the receiver's reason.
func TestBadHeaderRefused(t *testing.T) {
	t.Parallel()
	var armed atomic32
	opts := Options{hooks: &testHooks{beforeSend: func(hdr []byte) {
		if msgKind(hdr[4]) == msgPut && armed.swap(0) == 1 {
			binary.BigEndian.PutUint64(hdr[24:], encodeAddr(1, 1<<20)) // beyond the 4 KiB window
		}
	}}}
	rs := openRanks(t, 2, 4096, 4096, opts, nil, true)
	a, b := rs[0], rs[1]
	e := a.eng[1]
	errorMentions(t, e.Put(a.remote[1].Addr()+4000, a.src.Addr(), 512), hal.ErrInvalidArgument, "beyond registration")
	armed.store(1)
	if err := e.Put(a.remote[1].Addr(), a.src.Addr(), 64); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the receiver records the bad message", func() bool { return b.nd.Err() != nil })
	errorMentions(t, b.nd.PeerErr(0), hal.ErrRemote, "rank 0 sent a message this rank refuses", "beyond registration")
	eventually(t, "the sender's engine fails", func() bool { _, err := e.Completed(); return err != nil || a.nd.Err() != nil })
	var err error
	for deadline := deadline(); err == nil && !timeUp(deadline); {
		err = e.Signal(a.remote[1].Addr(), 0, 0)
	}
	errorMentions(t, err, hal.ErrRemote, "rank 1")
}

// A process that holds the job's id but not its secret is refused by
// the challenge; the rank it tried to reach keeps working, and the
// genuine rank connects afterwards on the same listen handle.
func TestStrangerRefused(t *testing.T) {
	t.Parallel()
	secret := bytes.Repeat([]byte{7}, 32)
	job := newJob()
	rs := openJob(t, job, 2, 4096, 4096, Options{}, secret, false)
	stranger := openJob(t, job, 2, 4096, 4096, Options{}, bytes.Repeat([]byte{9}, 32), false)
	// The stranger claims rank 0 and reaches rank 1 with rank 1's real
	// address.
	_, err := stranger[0].nd.NewEngine(endpointOf(rs[1]))
	errorMentions(t, err, auth.ErrAuth)
	eventually(t, "rank 1 records the refusal", func() bool { return len(rs[1].nd.Refused()) > 0 })
	if err := rs[1].nd.Err(); err != nil {
		t.Fatalf("a refused stranger disturbed the job: %v", err)
	}
	errorMentions(t, rs[1].nd.Refused()[0], hal.ErrRemote, "rank 0")
	e, err := rs[0].nd.NewEngine(endpointOf(rs[1]))
	if err != nil {
		t.Fatalf("the genuine rank 0 after the stranger: %v", err)
	}
	rs[0].eng[1] = e
	fill(rs[0].src.Host()[:100], 3)
	if err := e.Put(rs[0].remote[1].Addr(), rs[0].src.Addr(), 100); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(rs[0].remote[1].Addr()+4088, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, rs[1].win, 4088, 1, rs[1].nd.Err)
	if !bytes.Equal(rs[1].win.Host()[:100], rs[0].src.Host()[:100]) {
		t.Error("the genuine rank's put did not arrive")
	}
}

// A rank that dies (no goodbye) is reported by rank: the survivor's
// NetDevice records it and its engine to it fails naming it.
func TestPeerLoss(t *testing.T) {
	t.Parallel()
	rs := openRanks(t, 2, 4096, 4096, Options{}, nil, true)
	// Traffic first, so the link is in use.
	if err := rs[1].eng[0].Signal(rs[1].remote[0].Addr(), 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, rs[0].win, 0, 1, nil)
	rs[0].eng[1] = nil
	rs[0].nd.abort()
	rs[0].nd = nil
	eventually(t, "rank 1 sees rank 0 lost", func() bool { return rs[1].nd.Err() != nil })
	errorMentions(t, rs[1].nd.PeerErr(0), hal.ErrRemote, "rank 0")
	var err error
	for deadline := deadline(); err == nil && !timeUp(deadline); {
		err = rs[1].eng[0].Put(rs[1].remote[0].Addr(), rs[1].src.Addr(), 8)
	}
	errorMentions(t, err, hal.ErrRemote, "rank 0")
	rs[0].win.Free()
	rs[0].src.Free()
	rs[0].dev.Close()
}

// Engines to the own endpoint copy and signal within the device.
func TestLocalEngine(t *testing.T) {
	t.Parallel()
	rs := openRanks(t, 2, 4096, 4096, Options{}, nil, false)
	x := rs[0]
	e, err := x.nd.NewEngine(x.dev.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	fill(x.src.Host()[:256], 5)
	if err := e.Copy(x.win.Addr(), x.src.Addr(), 256); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(x.win.Addr()+1024, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, x.win, 1024, 1, nil)
	if !bytes.Equal(x.win.Host()[:256], x.src.Host()[:256]) {
		t.Error("the local copy did not arrive")
	}
}

// Every decoder refuses what it did not encode and never panics.
func FuzzDecode(f *testing.F) {
	hdr := make([]byte, headerSize)
	encodeHeader(hdr, message{kind: msgSignal, e: 1, s: 2, a: encodeAddr(1, 8)})
	f.Add(hdr)
	f.Add(append(hdr[:0:0], encodeHandle(handle{Job: 1, Nonce: 2, Rank: 1, Reg: 1, Size: 64})...))
	f.Add(encodeAddress(address{job: 1, nonce: 3, rank: 1, chunk: MinChunk, handles: make([]ncclnet.Handle, 2)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, p, err := decodeMessage(b, MinChunk); err == nil {
			h := make([]byte, headerSize)
			encodeHeader(h, m)
			if !bytes.Equal(h, b[:headerSize]) || len(p) != len(b)-headerSize {
				t.Errorf("message %x decodes to %+v, which encodes to %x", b, m, h)
			}
		}
		if h, err := decodeHandle(b); err == nil && !bytes.Equal(encodeHandle(h), b) {
			t.Errorf("handle %x decodes to %+v, which encodes differently", b, h)
		}
		if a, err := decodeAddress(b, 2); err == nil && (a.rank < 0 || a.rank >= 2 || len(a.handles) != 2) {
			t.Errorf("address %x decodes to rank %d with %d handles", b, a.rank, len(a.handles))
		}
	})
}

// Bytes that are not weft's, sent on the listen handle a rank keeps for
// rank 0, are refused and recorded; rank 0 connects afterwards.
func TestGarbageRefused(t *testing.T) {
	t.Parallel()
	rs := openRanks(t, 2, 4096, 4096, Options{}, nil, false)
	a, err := decodeAddress(rs[1].nd.Address(), 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ncclnet.Load(plugin(t))
	if err != nil {
		t.Fatal(err)
	}
	d := p.Dial(0, a.handles[0])
	defer d.Free()
	var s *ncclnet.SendComm
	eventually(t, "connect", func() bool {
		var err error
		if s, err = d.Connect(); err != nil {
			t.Fatal(err)
		}
		return s != nil
	})
	defer s.Close()
	junk := bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 4)
	mr, err := s.RegMr(hostAddrOf(junk), len(junk), ncclnet.PtrHost)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	var req *ncclnet.Request
	eventually(t, "isend", func() bool {
		var err error
		if req, err = s.ISend(hostAddrOf(junk), len(junk), 0, mr); err != nil {
			t.Fatal(err)
		}
		return req != nil
	})
	eventually(t, "send completes", func() bool { done, _, err := req.Test(); return done || err != nil })
	eventually(t, "rank 1 refuses the junk", func() bool { return len(rs[1].nd.Refused()) > 0 })
	errorMentions(t, rs[1].nd.Refused()[0], hal.ErrRemote, "claiming rank 0", "bad magic")
	if err := rs[1].nd.Err(); err != nil {
		t.Fatalf("junk disturbed the job: %v", err)
	}
	e, err := rs[0].nd.NewEngine(endpointOf(rs[1]))
	if err != nil {
		t.Fatalf("rank 0 after the junk: %v", err)
	}
	rs[0].eng[1] = e
	if err := e.Signal(rs[0].remote[1].Addr()+8, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, rs[1].win, 8, 1, rs[1].nd.Err)
}
