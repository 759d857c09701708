package ucx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
)

var testSecret = bytes.Repeat([]byte{0x5a}, 32)

// Rounds of puts then a signal: whenever the receiver sees the semaphore
// reach k, the data of round k and the count are in its window (the
// signal never overtakes the puts), over TCP and shared memory, with
// memory registered directly and staged through host memory on both
// sides.
func TestPutSignalOrdering(t *testing.T) {
	needUCX(t)
	t.Parallel()
	const data, rounds = 20000 + 13, 12 // bytes per round: several staging chunks, not a multiple of 8
	const sem, cnt = 0, 8
	for _, tls := range transports {
		for _, staging := range []Staging{StagingAuto, StagingAlways} {
			t.Run(fmt.Sprintf("%s/staging%d", tls, staging), func(t *testing.T) {
				rs := openRanks(t, 2, 64+data, data, testOptions(tls, staging), testSecret)
				if got := rs[0].nd.Staged(); got != (staging == StagingAlways) {
					t.Fatalf("Staged() = %v with staging %d", got, staging)
				}
				e, win := rs[0].eng[1], rs[0].remote[1]
				for k := 1; k <= rounds; k++ {
					payload := make([]byte, data)
					for i := range payload {
						payload[i] = byte(i*k + k)
					}
					if err := rs[0].dev.Write(rs[0].src, 0, payload); err != nil {
						t.Fatal(err)
					}
					// Two puts (the halves, the second first), then the signal.
					half := int64(data / 2)
					if err := e.Put(win.Addr()+64+uint64(half), rs[0].src.Addr()+uint64(half), data-half); err != nil {
						t.Fatal(err)
					}
					if err := e.Put(win.Addr()+64, rs[0].src.Addr(), half); err != nil {
						t.Fatal(err)
					}
					if err := e.Signal(win.Addr()+sem, win.Addr()+cnt, uint64(1000+k)); err != nil {
						t.Fatal(err)
					}
					awaitWord(t, rs[1].win, sem, uint64(k), fmt.Sprintf("round %d", k))
					if got := word(rs[1].win, cnt); got != uint64(1000+k) {
						t.Fatalf("round %d: count %d visible with the semaphore, want %d", k, got, 1000+k)
					}
					got := make([]byte, data)
					if err := rs[1].dev.Read(got, rs[1].win, 64); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, payload) {
						t.Fatalf("round %d: the semaphore is visible before the data", k)
					}
					// The source may be rewritten once the ticket completes.
					awaitTicket(t, e, fmt.Sprintf("round %d", k))
				}
				if err := rs[0].nd.Err(); err != nil {
					t.Fatal(err)
				}
				if err := rs[1].nd.Err(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// A release (AckSignal) after puts to a staged registration goes without
// the endpoint flush and leaves the puts' staged ranges to the next
// Signal, which applies them; the release itself lands and counts.
func TestAckSignalLeavesRanges(t *testing.T) {
	needUCX(t)
	t.Parallel()
	const data = 4096 + 24
	rs := openRanks(t, 2, 64+data, data, testOptions("tcp", StagingAlways), testSecret)
	e := rs[0].eng[1].(*engine)
	win := rs[0].remote[1]
	payload := make([]byte, data)
	for i := range payload {
		payload[i] = byte(3*i + 1)
	}
	if err := rs[0].dev.Write(rs[0].src, 0, payload); err != nil {
		t.Fatal(err)
	}
	if err := e.Put(win.Addr()+64, rs[0].src.Addr(), data); err != nil {
		t.Fatal(err)
	}
	if err := e.AckSignal(win.Addr()+16, win.Addr()+24, 7); err != nil {
		t.Fatal(err)
	}
	e.nd.wmu.Lock()
	held := len(e.curRanges)
	e.nd.wmu.Unlock()
	if held != 1 {
		t.Fatalf("after a put and a release, %d staged ranges wait for the next signal, want 1 (the release must not carry them)", held)
	}
	awaitWord(t, rs[1].win, 16, 1, "release")
	if got := word(rs[1].win, 24); got != 7 {
		t.Fatalf("release count word %d, want 7", got)
	}
	if err := e.Signal(win.Addr(), win.Addr()+8, 9); err != nil {
		t.Fatal(err)
	}
	awaitWord(t, rs[1].win, 0, 1, "signal")
	got := make([]byte, data)
	if err := rs[1].dev.Read(got, rs[1].win, 64); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("the signal after a release did not apply the put before it")
	}
	if w := word(rs[1].win, 16); w != 1 {
		t.Fatalf("release semaphore %d after one release, want 1", w)
	}
}

// Flush: a ticket completes once its puts are complete at the source; a
// Copy after a put waits for it, and a Signal after a Copy is seen only
// once the copy is done; an engine to this rank's own endpoint copies
// locally. 3 ranks all to all, each signalling every other.
func TestFlushCopyAllToAll(t *testing.T) {
	needUCX(t)
	t.Parallel()
	for _, staging := range []Staging{StagingAuto, StagingAlways} {
		t.Run(fmt.Sprintf("staging%d", staging), func(t *testing.T) { flushCopyAllToAll(t, staging) })
	}
}

func flushCopyAllToAll(t *testing.T, staging Staging) {
	const n, bytesPer = 3, 4096 + 5
	rs := openRanks(t, n, 64+n*bytesPer, 2*bytesPer, testOptions("tcp", staging), testSecret)
	for _, x := range rs {
		pat := bytes.Repeat([]byte{byte(0x40 + x.r)}, bytesPer)
		if err := x.dev.Write(x.src, bytesPer, pat); err != nil {
			t.Fatal(err)
		}
		for p := range rs {
			if p == x.r {
				continue
			}
			e := x.eng[p]
			// Copy the pattern to the source's first half, then put it.
			if err := e.Copy(x.src.Addr(), x.src.Addr()+bytesPer, bytesPer); err != nil {
				t.Fatal(err)
			}
			if err := e.Put(x.remote[p].Addr()+64+uint64(x.r*bytesPer), x.src.Addr(), bytesPer); err != nil {
				t.Fatal(err)
			}
			if err := e.Signal(x.remote[p].Addr()+8*uint64(x.r), 0, 0); err != nil {
				t.Fatal(err)
			}
			awaitTicket(t, e, fmt.Sprintf("rank %d to %d", x.r, p))
		}
	}
	for _, x := range rs {
		for p := range rs {
			if p == x.r {
				continue
			}
			awaitWord(t, x.win, 8*p, 1, fmt.Sprintf("rank %d from %d", x.r, p))
			got := make([]byte, bytesPer)
			if err := x.dev.Read(got, x.win, int64(64+p*bytesPer)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, bytes.Repeat([]byte{byte(0x40 + p)}, bytesPer)) {
				t.Fatalf("rank %d: bytes from rank %d wrong", x.r, p)
			}
		}
	}
	own, err := rs[0].nd.NewEngine(endpointOf(rs[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := own.Copy(rs[0].win.Addr()+64, rs[0].src.Addr(), 16); err != nil {
		t.Fatal(err)
	}
	awaitTicket(t, own, "own engine")
}

// Handles with any byte wrong are refused with the right error kind.
func TestBadHandles(t *testing.T) {
	needUCX(t)
	t.Parallel()
	rs := openRanks(t, 2, 4096, 64, testOptions("tcp", StagingAuto), nil)
	good, err := rs[1].nd.ExportPort(rs[1].win)
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) hal.Handle { return f(append([]byte(nil), good...)) }
	put64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], v); return b }
	}
	cases := []struct {
		name string
		h    hal.Handle
		kind error
	}{
		{"empty", nil, hal.ErrInvalidArgument},
		{"truncated header", good[:40], hal.ErrInvalidArgument},
		{"truncated key", good[:len(good)-1], hal.ErrInvalidArgument},
		{"trailing byte", append(append([]byte(nil), good...), 0), hal.ErrInvalidArgument},
		{"magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), hal.ErrInvalidArgument},
		{"version", mut(func(b []byte) []byte { b[4] = 9; return b }), hal.ErrInvalidArgument},
		{"flags", mut(func(b []byte) []byte { b[5] = 4; return b }), hal.ErrInvalidArgument},
		{"reserved", mut(func(b []byte) []byte { b[52] = 1; return b }), hal.ErrInvalidArgument},
		{"key length 0", mut(func(b []byte) []byte { b[48], b[49] = 0, 0; return b }), hal.ErrInvalidArgument},
		{"key length too long", mut(func(b []byte) []byte { b[48], b[49] = 0xff, 0xff; return b }), hal.ErrInvalidArgument},
		{"size 0", mut(put64(40, 0)), hal.ErrInvalidArgument},
		{"size 2 TiB", mut(put64(40, 2<<40)), hal.ErrInvalidArgument},
		{"wrapping range", mut(put64(32, ^uint64(0)-10)), hal.ErrInvalidArgument},
		{"rank outside the job", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[24:], 7); return b }), hal.ErrInvalidArgument},
		{"another job", mut(put64(8, 12345)), hal.ErrInvalidUsage},
		{"this rank, another incarnation", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[24:], 0); return b }), hal.ErrInvalidUsage},
		{"socket handle", hal.Handle(bytes.Repeat([]byte{1}, 40)), hal.ErrInvalidArgument},
		{"key naming no domain", rkeyMut(good, func(k []byte) []byte { clear(k[:8]); return k }), hal.ErrInvalidArgument},
		{"key naming a domain more", rkeyMut(good, func(k []byte) []byte {
			m := binary.NativeEndian.Uint64(k)
			binary.NativeEndian.PutUint64(k, m|1<<63)
			return k
		}), hal.ErrInvalidArgument},
		{"key of memory type 200", rkeyMut(good, func(k []byte) []byte { k[8] = 200; return k }), hal.ErrInvalidArgument},
		{"key with a trailing byte", rkeyMut(good, func(k []byte) []byte { return append(k, 0) }), hal.ErrInvalidArgument},
		{"key with a domain's length too long", rkeyMut(good, func(k []byte) []byte { k[9] = 255; return k }), hal.ErrInvalidArgument},
	}
	for _, c := range cases {
		if _, err := rs[0].nd.ImportPort(c.h); err == nil || !errors.Is(err, c.kind) {
			t.Errorf("%s: ImportPort: %v, want an error wrapping %v", c.name, err, c.kind)
		} else if !strings.Contains(err.Error(), "rank 0") {
			t.Errorf("%s: %v does not name the importing rank", c.name, err)
		}
	}
	b, err := rs[0].nd.ImportPort(good)
	if err != nil {
		t.Fatal(err)
	}
	// A put or signal outside the imported range is refused.
	e := rs[0].eng[1]
	if err := e.Put(b.Addr()+4090, rs[0].src.Addr(), 16); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("put beyond the import: %v", err)
	}
	if err := e.Signal(b.Addr()+3, 0, 0); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("unaligned signal: %v", err)
	}
	// Addresses in wrong form.
	if _, err := rs[0].nd.NewEngine(hal.Endpoint{Net: map[string][]byte{Name: []byte("WUXA")}}); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("short address: %v", err)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("second Free: %v", err)
	}
}

// Strangers: a side-channel connection without the secret, one with a
// wrong secret, and garbage are refused and recorded; an engine of a
// NetDevice with another secret cannot connect; a forged signal naming a
// session that does not exist is refused; the job goes on.
func TestStrangerRefused(t *testing.T) {
	needUCX(t)
	t.Parallel()
	rs := openRanks(t, 2, 4096, 4096, testOptions("tcp", StagingAuto), testSecret)
	a, err := decodeAddress(rs[1].nd.Address())
	if err != nil {
		t.Fatal(err)
	}
	// Garbage instead of an authentication hello.
	c, err := net.Dial("tcp", a.side)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(bytes.Repeat([]byte("junk"), 40))
	c.SetReadDeadline(time.Now().Add(failBound))
	buf := make([]byte, 64)
	for {
		if _, err := c.Read(buf); err != nil {
			break // closed by the NetDevice
		}
	}
	c.Close()
	// A client with the wrong secret.
	c, err = net.Dial("tcp", a.side)
	if err != nil {
		t.Fatal(err)
	}
	wrong, _ := auth.SecretFromBytes(bytes.Repeat([]byte{1}, 32))
	if _, err := auth.Client(c, auth.Config{Secret: wrong, Proto: auth.ProtoSocket, Context: fmt.Sprintf("%016x ucx to rank %d", a.job, 1), Timeout: failBound}); err == nil {
		t.Fatal("a client with another secret authenticated")
	}
	c.Close()
	deadline := time.Now().Add(failBound)
	for len(rs[1].nd.Refused()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("refusals recorded: %v, want 2", rs[1].nd.Refused())
		}
		time.Sleep(time.Millisecond)
	}
	for _, err := range rs[1].nd.Refused() {
		if strings.Contains(err.Error(), fmt.Sprintf("%x", testSecret[:8])) {
			t.Fatalf("a refusal prints the secret: %v", err)
		}
	}
	// A forged signal: no such session.
	rs[1].nd.apply(encodeSignal(signalMsg{kind: kindSignal, rank: 0, engine: 999, token: 1, sem: rs[1].win.Addr()}), time.Time{})
	// The job is undisturbed.
	if err := rs[1].nd.Err(); err != nil {
		t.Fatalf("a stranger disturbed the job: %v", err)
	}
	if err := rs[0].eng[1].Signal(rs[0].remote[1].Addr(), 0, 0); err != nil {
		t.Fatal(err)
	}
	awaitWord(t, rs[1].win, 0, 1, "signal after the strangers")
	// A NetDevice of the same job with another secret cannot connect.
	dev, err := hal.Open("host", hal.Config{Ordinal: 5, Rank: 0, JobID: newJob()})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	job := a.job
	imp, err := Open(dev, hal.NetConfig{Rank: 0, NRanks: 2, JobID: "x", Secret: bytes.Repeat([]byte{2}, 32), OneHost: true}, testOptions("tcp", StagingAuto))
	if err != nil {
		t.Fatal(err)
	}
	defer imp.Close()
	imp.job = job // claim the job: only the secret is missing
	if _, err := imp.NewEngine(endpointOf(rs[1])); err == nil || !errors.Is(err, hal.ErrRemote) {
		t.Fatalf("an engine with another secret: %v, want a refusal wrapping ErrRemote", err)
	}
}

// A peer lost without a goodbye (its side channel ends) is reported by
// rank on the NetDevice, and engines to it fail with an error naming it.
func TestPeerLossReportedByRank(t *testing.T) {
	needUCX(t)
	t.Parallel()
	rs := openRanks(t, 3, 4096, 4096, testOptions("tcp", StagingAuto), testSecret)
	// Rank 2 "dies": its engines' side channels end without a goodbye.
	for p, e := range rs[2].eng {
		if e != nil {
			e.(*engine).closing.Store(true)
			e.(*engine).conn.Close()
			rs[2].eng[p] = nil
		}
	}
	for _, r := range []int{0, 1} {
		deadline := time.Now().Add(failBound)
		for rs[r].nd.PeerErr(2) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("rank %d did not notice rank 2's loss", r)
			}
			time.Sleep(time.Millisecond)
		}
		err := rs[r].nd.Err()
		if err == nil || !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "peer rank 2 is lost") {
			t.Fatalf("rank %d: Err() = %v, want the loss of peer rank 2 (ErrRemote)", r, err)
		}
		if err := rs[r].eng[2].Signal(rs[r].remote[2].Addr(), 0, 0); err == nil || !strings.Contains(err.Error(), "rank 2") {
			t.Fatalf("rank %d: signal to the lost rank: %v, want an error naming rank 2", r, err)
		}
		if err := rs[r].nd.PeerErr(1 - r); err != nil {
			t.Fatalf("rank %d: the healthy peer is reported failed: %v", r, err)
		}
	}
	rs[2].nd.closing.Store(true) // its NetDevice goes at cleanup without waiting
}

// Probe names UCX's version where it runs, and where UCX_* settings
// leave it nothing to run on, says so (the answer is kept per setting).
func TestProbe(t *testing.T) {
	needUCX(t)
	a := Probe()
	if !a.Available || !strings.HasPrefix(a.Reason, "UCX 1.") {
		t.Fatalf("Probe() = %+v, want available with UCX's version", a)
	}
	t.Setenv("UCX_TLS", "no-such-transport")
	if b := Probe(); b.Available || !strings.Contains(b.Reason, "cannot run here") {
		t.Fatalf("Probe() with UCX_TLS=no-such-transport = %+v, want unavailable saying why", b)
	}
	t.Setenv("WEFT_UCX_STAGING", "always")
	if o, err := OptionsFromEnv(); err != nil || o.Staging != StagingAlways {
		t.Fatalf("WEFT_UCX_STAGING=always: %+v, %v", o, err)
	}
	t.Setenv("WEFT_UCX_STAGING", "sometimes")
	if _, err := OptionsFromEnv(); !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_UCX_STAGING") {
		t.Fatalf("WEFT_UCX_STAGING=sometimes: %v, want ErrInvalidArgument naming the variable", err)
	}
	if _, err := Open(nil, hal.NetConfig{Rank: 0, NRanks: 1}, Options{}); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Fatalf("Open(nil device): %v, want ErrInvalidArgument", err)
	}
	if _, err := Open(nil, hal.NetConfig{Rank: 2, NRanks: 2}, Options{}); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Fatalf("Open(rank 2 of 2): %v, want ErrInvalidArgument", err)
	}
	if _, err := Open(nil, hal.NetConfig{Rank: 0, NRanks: 2, Secret: []byte("short")}, Options{}); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Fatalf("Open with a 5-byte secret: %v, want ErrInvalidArgument", err)
	}
}

// rkeyMut returns handle h with its packed remote key changed by f (the
// length field follows).
func rkeyMut(h hal.Handle, f func(k []byte) []byte) hal.Handle {
	k := f(append([]byte(nil), h[handleHeader:]...))
	out := append([]byte(nil), h[:handleHeader]...)
	binary.BigEndian.PutUint16(out[48:], uint16(len(k)))
	return append(out, k...)
}

// A signal of an authenticated session that is malformed — a semaphore
// outside the receiver's registrations, a sequence number out of order —
// fails the sending rank, named, on the receiver; other peers go on.
func TestMalformedSignalFailsSender(t *testing.T) {
	needUCX(t)
	t.Parallel()
	for _, bad := range []string{"semaphore", "sequence"} {
		t.Run(bad, func(t *testing.T) {
			rs := openRanks(t, 3, 4096, 4096, testOptions("tcp", StagingAuto), testSecret)
			e := rs[0].eng[1].(*engine)
			m := signalMsg{kind: kindSignal, rank: 0, engine: e.id, token: e.token, seq: 0, sem: rs[0].remote[1].Addr() + 8192}
			if bad == "sequence" {
				m.sem, m.seq = rs[0].remote[1].Addr(), 5
			}
			rs[0].nd.wmu.Lock()
			req, err := e.ep.SendAM(amID, encodeSignal(m))
			rs[0].nd.wmu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(failBound)
			for rs[1].nd.PeerErr(0) == nil {
				rs[0].nd.wmu.Lock()
				rs[0].nd.w.Progress()
				rs[0].nd.lib.Done(&req, "am")
				rs[0].nd.wmu.Unlock()
				if time.Now().After(deadline) {
					t.Fatalf("rank 1 did not fail rank 0 for a bad %s", bad)
				}
				time.Sleep(100 * time.Microsecond)
			}
			err = rs[1].nd.PeerErr(0)
			if !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "peer rank 0") || !strings.Contains(err.Error(), bad) {
				t.Fatalf("rank 1: %v, want a failure of peer rank 0 naming the %s", err, bad)
			}
			if err := rs[2].eng[1].Signal(rs[2].remote[1].Addr(), 0, 0); err != nil {
				t.Fatal(err)
			}
			awaitWord(t, rs[1].win, 0, 1, "signal of rank 2")
		})
	}
}

// tcpSelected follows UCX_TLS's syntax: the TCP segment settings are made
// only when UCX may load its TCP transport (otherwise UCX warns of
// invalid configurations).
func TestTCPSelected(t *testing.T) {
	for tls, want := range map[string]bool{
		"": true, "all": true, "tcp": true, "self,tcp": true, " sm, TCP ": true,
		"shm": false, "sm,self": false, "rc,ud": false,
		"^tcp": false, "^shm": true, "^rc,tcp": false, "^all": false,
	} {
		if got := tcpSelected(tls); got != want {
			t.Errorf("tcpSelected(%q) = %v, want %v", tls, got, want)
		}
	}
}

// UnexportPort withdraws a registration (after waiting for what the
// receiving sessions were applying into it, a staged copy out of the
// bounce region included): a second UnexportPort is refused with
// ErrInvalidArgument naming the rank, size and address, an ImportPort of
// its handle here with ErrInvalidUsage, and a peer's signal into it fails
// that peer on the receiver with an error naming the registration, the
// semaphore and count left as they were. Close does not release it again;
// UnexportPort after Close is ErrInvalidUsage. Registered directly and
// staged through host memory.
func TestUnexportPort(t *testing.T) {
	needUCX(t)
	t.Parallel()
	for _, staging := range []Staging{StagingAuto, StagingAlways} {
		t.Run(fmt.Sprintf("staging%d", staging), func(t *testing.T) {
			rs := openRanks(t, 2, 4096, 4096, testOptions("tcp", staging), testSecret)
			const size = 4096
			buf, err := rs[1].dev.Alloc(size)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { buf.Free() }) // before the ranks close
			h, err := rs[1].nd.ExportPort(buf)
			if err != nil {
				t.Fatal(err)
			}
			x, err := decodeHandle(h)
			if err != nil {
				t.Fatal(err)
			}
			imp, err := rs[0].nd.ImportPort(h)
			if err != nil {
				t.Fatal(err)
			}
			// One round lands: data (staged: copied out of the bounce
			// region by the receiver's device engine), count, semaphore.
			e := rs[0].eng[1]
			payload := bytes.Repeat([]byte("landed.."), 8)
			if err := rs[0].dev.Write(rs[0].src, 0, payload); err != nil {
				t.Fatal(err)
			}
			if err := e.Put(imp.Addr()+64, rs[0].src.Addr(), int64(len(payload))); err != nil {
				t.Fatal(err)
			}
			if err := e.Signal(imp.Addr(), imp.Addr()+8, 7); err != nil {
				t.Fatal(err)
			}
			awaitWord(t, buf, 0, 1, "signal before UnexportPort")
			awaitTicket(t, e, "round before UnexportPort")

			if err := rs[1].nd.UnexportPort(buf); err != nil {
				t.Fatalf("UnexportPort: %v", err)
			}
			err = rs[1].nd.UnexportPort(buf)
			if !errors.Is(err, hal.ErrInvalidArgument) {
				t.Fatalf("second UnexportPort: %v, want ErrInvalidArgument", err)
			}
			for _, part := range []string{"ucx: rank 1", fmt.Sprintf("%d bytes", size), fmt.Sprintf("%#x", buf.Addr()), "not exported"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("second UnexportPort: %q does not mention %q", err, part)
				}
			}
			if _, err := rs[1].nd.ImportPort(h); !errors.Is(err, hal.ErrInvalidUsage) {
				t.Errorf("own ImportPort of an unexported registration: %v, want ErrInvalidUsage", err)
			}
			if err := rs[1].nd.UnexportPort(nil); !errors.Is(err, hal.ErrInvalidArgument) {
				t.Errorf("UnexportPort(nil): %v, want ErrInvalidArgument", err)
			}

			// A put and signal into it afterwards: the signal is refused
			// and fails rank 0 on rank 1. (A staged registration's bounce
			// region is freed: no put is sent into it, only the signal.)
			if staging == StagingAuto {
				if err := e.Put(imp.Addr()+64, rs[0].src.Addr(), int64(len(payload))); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Signal(imp.Addr(), imp.Addr()+8, 8); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(failBound)
			for rs[1].nd.PeerErr(0) == nil {
				if time.Now().After(deadline) {
					t.Fatalf("rank 1 did not refuse a signal into an unexported registration")
				}
				time.Sleep(100 * time.Microsecond)
			}
			err = rs[1].nd.PeerErr(0)
			for _, part := range []string{"peer rank 0", "semaphore", fmt.Sprintf("registration %d of rank 1", x.reg), "unexported"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("refusal %q does not mention %q", err, part)
				}
			}
			if !errors.Is(err, hal.ErrRemote) {
				t.Errorf("refusal %v does not wrap ErrRemote", err)
			}
			if s, c := word(buf, 0), word(buf, 8); s != 1 || c != 7 {
				t.Errorf("after the refused signal: semaphore %d, count %d, want 1 and 7", s, c)
			}

			// Close releases the other registrations only.
			for _, e := range rs[1].eng {
				if e != nil {
					e.Close()
				}
			}
			rs[1].eng = nil
			if err := rs[1].nd.Close(); err != nil {
				t.Errorf("Close after UnexportPort: %v", err)
			}
			if err := rs[1].nd.UnexportPort(buf); !errors.Is(err, hal.ErrInvalidUsage) {
				t.Errorf("UnexportPort after Close: %v, want ErrInvalidUsage", err)
			}
		})
	}
}

// StagingDevice (the host windows of a GPU UCX cannot reach, on hal/host):
// memory with a host view is registered directly although device memory
// counts as staged, so a put from an exported window leaves without a
// staging copy and its signal is applied by the CPU; a put from memory not
// registered (the rank's source buffer) still goes through the staging
// slots. Both land before their signals.
func TestStagingDeviceHostWindows(t *testing.T) {
	needUCX(t)
	t.Parallel()
	const data = 5000 + 3
	rs := openRanks(t, 2, 64+2*data, data, testOptions("tcp", StagingDevice), testSecret)
	if !rs[0].nd.Staged() || !rs[0].nd.HostWindows() {
		t.Fatalf("StagingDevice: Staged() %v, HostWindows() %v; want both", rs[0].nd.Staged(), rs[0].nd.HostWindows())
	}
	e, win := rs[0].eng[1], rs[0].remote[1]
	eng := e.(*engine)
	staged := func() bool { // the engine's fields are guarded by its NetDevice's wmu
		eng.nd.wmu.Lock()
		defer eng.nd.wmu.Unlock()
		return eng.staging != nil
	}
	payload := make([]byte, data)
	for i := range payload {
		payload[i] = byte(i*7 + 1)
	}
	// From rank 0's own exported window: direct.
	if err := rs[0].dev.Write(rs[0].win, 64, payload); err != nil {
		t.Fatal(err)
	}
	if err := e.Put(win.Addr()+64, rs[0].win.Addr()+64, data); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(win.Addr(), win.Addr()+8, 7); err != nil {
		t.Fatal(err)
	}
	awaitWord(t, rs[1].win, 0, 1, "signal after a put from a host window")
	awaitTicket(t, e, "put from a host window")
	got := make([]byte, data)
	if err := rs[1].dev.Read(got, rs[1].win, 64); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) || word(rs[1].win, 8) != 7 {
		t.Fatalf("put from a host window: data or count wrong before the signal (count %d)", word(rs[1].win, 8))
	}
	if staged() {
		t.Fatal("a put from a registered host window went through the staging slots")
	}
	// From the unregistered source buffer: staged.
	for i := range payload {
		payload[i] = byte(i*3 + 5)
	}
	if err := rs[0].dev.Write(rs[0].src, 0, payload); err != nil {
		t.Fatal(err)
	}
	if err := e.Put(win.Addr()+64+data, rs[0].src.Addr(), data); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(win.Addr(), win.Addr()+8, 8); err != nil {
		t.Fatal(err)
	}
	awaitWord(t, rs[1].win, 0, 2, "signal after a staged put")
	awaitTicket(t, e, "staged put")
	if err := rs[1].dev.Read(got, rs[1].win, 64+data); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("staged put: data wrong after its signal")
	}
	if !staged() {
		t.Fatal("a put from an unregistered buffer did not go through the staging slots")
	}
	for _, x := range rs {
		if err := x.nd.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A small put from a registered host window followed by its signal within
// a proxy pass (BeginBatch … EndBatch) travels inside the signal's active
// message: the put waits for the signal (Holding), no endpoint flush
// orders them, and the receiver places the bytes before the count and
// the semaphore. A put too large to carry, a put that a second put
// follows, and a put the pass ends on go out as ucp_put_nbx, and their
// signals still find them landed. Over TCP and shared memory.
func TestPutInSignalMessage(t *testing.T) {
	needUCX(t)
	t.Parallel()
	const area = maxInline + 512
	for _, tls := range transports {
		t.Run(tls, func(t *testing.T) {
			rs := openRanks(t, 2, 64+2*area, 64, testOptions(tls, StagingDevice), testSecret)
			e, win := rs[0].eng[1], rs[0].remote[1]
			eng := e.(*engine)
			fused := func() int {
				eng.nd.wmu.Lock()
				defer eng.nd.wmu.Unlock()
				return eng.fused
			}
			signals := uint64(0)
			round := func(k int, sizes []int, endFirst bool) {
				t.Helper()
				var want [][]byte
				eng.BeginBatch()
				off := uint64(64)
				for i, n := range sizes {
					p := make([]byte, n)
					for j := range p {
						p[j] = byte(j*k + i + 1)
					}
					if err := rs[0].dev.Write(rs[0].win, int64(off), p); err != nil {
						t.Fatal(err)
					}
					if err := e.Put(win.Addr()+off, rs[0].win.Addr()+off, int64(n)); err != nil {
						t.Fatal(err)
					}
					want = append(want, p)
					off += uint64(n)
				}
				if held := eng.Holding(); held != (sizes[len(sizes)-1] <= maxInline) {
					t.Fatalf("round %d (puts of %v bytes): Holding() = %v", k, sizes, held)
				}
				if endFirst {
					if err := eng.EndBatch(); err != nil {
						t.Fatal(err)
					}
				}
				signals++
				if err := e.Signal(win.Addr(), win.Addr()+8, uint64(100+k)); err != nil {
					t.Fatal(err)
				}
				if !endFirst {
					if err := eng.EndBatch(); err != nil {
						t.Fatal(err)
					}
				}
				awaitWord(t, rs[1].win, 0, signals, fmt.Sprintf("round %d", k))
				if got := word(rs[1].win, 8); got != uint64(100+k) {
					t.Fatalf("round %d: count %d with the semaphore, want %d", k, got, 100+k)
				}
				off = 64
				for i, p := range want {
					got := make([]byte, len(p))
					if err := rs[1].dev.Read(got, rs[1].win, int64(off)); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, p) {
						t.Fatalf("round %d: put %d of %d bytes not there with its signal", k, i, len(p))
					}
					off += uint64(len(p))
				}
				awaitTicket(t, e, fmt.Sprintf("round %d", k))
			}
			for k, n := range []int{8, 64, 1000, maxInline} {
				before := fused()
				round(k+1, []int{n}, false)
				if fused() != before+1 {
					t.Fatalf("a put of %d bytes then its signal in one pass: not carried in the message", n)
				}
			}
			before := fused()
			round(5, []int{maxInline + 1}, false) // too large
			round(6, []int{64}, true)             // the pass ended before the signal
			if fused() != before {
				t.Fatalf("a put of %d bytes, or one whose pass ended first, was carried in a message", maxInline+1)
			}
			round(7, []int{300, 200}, false) // the second is carried, the first put before it
			if fused() != before+1 {
				t.Fatalf("two puts then a signal: %d carried, want the last one", fused()-before)
			}
			for _, x := range rs {
				if err := x.nd.Err(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestSpinOption: WEFT_UCX_SPIN_US sets how long the progress loop polls
// after work; unset takes DefaultSpin; a value out of range or not a
// number is an error naming the variable. No UCX needed.
func TestSpinOption(t *testing.T) {
	if o, err := OptionsFromEnv(); err != nil || o.Spin != 0 {
		t.Fatalf("unset: %+v, %v", o, err)
	}
	if o, err := (Options{}).withDefaults(); err != nil || o.Spin != DefaultSpin {
		t.Fatalf("defaults: spin %v, %v; want %v", o.Spin, err, DefaultSpin)
	}
	t.Setenv("WEFT_UCX_SPIN_US", "200")
	if o, err := OptionsFromEnv(); err != nil || o.Spin != 200*time.Microsecond {
		t.Fatalf("WEFT_UCX_SPIN_US=200: %v, %v", o.Spin, err)
	}
	for _, v := range []string{"0", "-5", "1000001", "fast"} {
		t.Setenv("WEFT_UCX_SPIN_US", v)
		if _, err := OptionsFromEnv(); !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_UCX_SPIN_US") {
			t.Errorf("WEFT_UCX_SPIN_US=%s: %v, want ErrInvalidArgument naming the variable", v, err)
		}
	}
	if _, err := (Options{Spin: 2 * time.Second}).withDefaults(); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("Options.Spin 2 s: %v, want ErrInvalidArgument", err)
	}
}

// Windows of a one-way plan — a put of a registered host window's slot,
// then its signal, eight times over — are issued without waiting for each
// signal's endpoint flush: the next window's put goes ahead while the
// flush is under way (issueAhead; over TCP a flush waits for every
// segment's acknowledgement). Each signal still finds its window, and
// every earlier one, landed.
func TestPutsPassPendingFlush(t *testing.T) {
	needUCX(t)
	t.Parallel()
	const windows, size = 8, 1 << 20
	for _, tls := range transports {
		t.Run(tls, func(t *testing.T) {
			rs := openRanks(t, 2, 64+windows*size, 64, testOptions(tls, StagingDevice), testSecret)
			e, win := rs[0].eng[1], rs[0].remote[1]
			eng := e.(*engine)
			want := make([]byte, windows*size)
			for i := range want {
				want[i] = byte(i*7 + i/size)
			}
			if err := rs[0].dev.Write(rs[0].win, 64, want); err != nil {
				t.Fatal(err)
			}
			for w := range windows {
				off := uint64(64 + w*size)
				if err := e.Put(win.Addr()+off, rs[0].win.Addr()+off, size); err != nil {
					t.Fatal(err)
				}
				if err := e.Signal(win.Addr(), win.Addr()+8, uint64(w+1)); err != nil {
					t.Fatal(err)
				}
			}
			got := make([]byte, size)
			for w := range windows {
				awaitWord(t, rs[1].win, 0, uint64(w+1), fmt.Sprintf("window %d", w))
				if err := rs[1].dev.Read(got, rs[1].win, int64(64+w*size)); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want[w*size:(w+1)*size]) {
					t.Fatalf("window %d: the semaphore reached %d before its bytes landed", w, w+1)
				}
			}
			eng.nd.wmu.Lock()
			ahead := eng.ahead
			eng.nd.wmu.Unlock()
			t.Logf("%d of %d puts issued ahead of a signal's flush", ahead, windows-1)
			if tls == "tcp" && ahead == 0 {
				t.Error("over TCP no put went ahead of a signal waiting for its flush")
			}
		})
	}
}
