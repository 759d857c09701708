package conformance

import (
	"errors"
	"fmt"
	"time"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Device-level tests: what every backend must do whatever its links offer.

func init() {
	Register(Case{ID: "device/info", Title: "the device describes itself and names its backend", Run: testInfo})
	Register(Case{ID: "device/memory", Title: "allocations are zeroed, sized as asked, and read back what was written at any offset", Run: testMemory})
	Register(Case{ID: "device/bad-input", Title: "bad sizes, out-of-range offsets, freed buffers, invalid plans and plans whose blocks cannot all be resident are refused with the right error", Run: testBadInput})
	Register(Case{ID: "device/streams", Title: "streams run work in order; events synchronise and time it", Run: testStreams})
	Register(Case{ID: "device/stream-after", Title: "work queued on a stream after After(prev) waits for prev's earlier work", Run: testStreamAfter})
}

func testInfo(t *T) error {
	info := t.Dev.Info()
	ep := t.Dev.Endpoint()
	switch {
	case info.Backend != t.Backend:
		return t.Errorf("Info().Backend is %q, want %q", info.Backend, t.Backend)
	case ep.Backend != t.Backend:
		return t.Errorf("Endpoint().Backend is %q, want %q", ep.Backend, t.Backend)
	case info.Name == "":
		return t.Errorf("Info().Name is empty")
	case info.Multiprocessors < 1:
		return t.Errorf("Info().Multiprocessors is %d, want at least 1", info.Multiprocessors)
	case info.MemoryBytes < 0:
		return t.Errorf("Info().MemoryBytes is %d", info.MemoryBytes)
	}
	return nil
}

func testMemory(t *T) error {
	sizes := []int64{1, 3, 4096, mib + 5}
	for i, n := range sizes {
		for _, host := range []bool{false, true} {
			kind := "Alloc"
			alloc := t.Dev.Alloc
			if host {
				kind, alloc = "AllocHost", t.Dev.AllocHost
			}
			b, err := alloc(n)
			if err != nil {
				return t.Errorf("%s(%d): %w", kind, n, err)
			}
			t.Cleanup(b.Free)
			what := fmt.Sprintf("%s(%d)", kind, n)
			if b.Size() != n {
				return t.Errorf("%s: Size() is %d", what, b.Size())
			}
			if b.Addr() == 0 {
				return t.Errorf("%s: Addr() is 0", what)
			}
			got, err := t.Read(b, 0, n)
			if err != nil {
				return err
			}
			if d := diff(what+": new memory", got, make([]byte, n)); d != "" {
				return t.Errorf("%s (memory must be zeroed)", d)
			}
			data := pattern(seed(t.Rank, i), n)
			if err := t.Write(b, 0, data); err != nil {
				return err
			}
			got, err = t.Read(b, 0, n)
			if err != nil {
				return err
			}
			if d := diff(what+": read back", got, data); d != "" {
				return t.Errorf("%s", d)
			}
			// Unaligned pieces.
			off, l := n/3, (n+1)/2
			piece := pattern(seed(t.Rank, i+100), l)
			if err := t.Write(b, off, piece); err != nil {
				return err
			}
			copy(data[off:], piece)
			got, err = t.Read(b, 1%n, n-1%n)
			if err != nil {
				return err
			}
			if d := diff(what+": read back after a write at offset "+fmt.Sprint(off), got, data[1%n:]); d != "" {
				return t.Errorf("%s", d)
			}
			if err := t.Dev.Write(b, n, nil); err != nil {
				return t.Errorf("%s: zero-byte write at the end: %w", what, err)
			}
			if err := t.Dev.Read(nil, b, n); err != nil {
				return t.Errorf("%s: zero-byte read at the end: %w", what, err)
			}
			if host {
				h := b.Host()
				if int64(len(h)) != n {
					return t.Errorf("%s: Host() has %d bytes, want %d (host-pinned memory must be host-accessible)", what, len(h), n)
				}
				if d := diff(what+": Host() after Write", h, data); d != "" {
					return t.Errorf("%s", d)
				}
			}
		}
	}
	return nil
}

func testBadInput(t *T) error {
	want := func(what string, err, sentinel error) error {
		if err == nil {
			return t.Errorf("%s succeeded; want an error wrapping %v", what, sentinel)
		}
		if !errors.Is(err, sentinel) {
			return t.Errorf("%s: error %q does not wrap %v", what, err, sentinel)
		}
		return nil
	}
	for _, n := range []int64{0, -1} {
		b, err := t.Dev.Alloc(n)
		if err == nil {
			b.Free()
		}
		if e := want(fmt.Sprintf("Alloc(%d)", n), err, hal.ErrInvalidArgument); e != nil {
			return e
		}
	}
	const n = 4096
	b, err := t.Alloc(n)
	if err != nil {
		return err
	}
	ranges := []struct {
		off int64
		len int
	}{{-1, 1}, {n, 1}, {n - 1, 2}, {n + 1, 0}, {0, n + 1}}
	for _, r := range ranges {
		if e := want(fmt.Sprintf("Write of %d bytes at offset %d of a %d-byte buffer", r.len, r.off, n), t.Dev.Write(b, r.off, make([]byte, r.len)), hal.ErrInvalidArgument); e != nil {
			return e
		}
		if e := want(fmt.Sprintf("Read of %d bytes at offset %d of a %d-byte buffer", r.len, r.off, n), t.Dev.Read(make([]byte, r.len), b, r.off), hal.ErrInvalidArgument); e != nil {
			return e
		}
	}
	f, err := t.Dev.Alloc(n)
	if err != nil {
		return t.Errorf("alloc: %w", err)
	}
	if err := f.Free(); err != nil {
		return t.Errorf("free: %w", err)
	}
	if e := want("Write to a freed buffer", t.Dev.Write(f, 0, []byte{1}), hal.ErrInvalidUsage); e != nil {
		return e
	}
	if e := want("Read of a freed buffer", t.Dev.Read(make([]byte, 1), f, 0), hal.ErrInvalidUsage); e != nil {
		return e
	}
	if e := want("a second Free", f.Free(), hal.ErrInvalidUsage); e != nil {
		return e
	}
	ex, ok := t.Dev.(hal.Executor)
	if !ok {
		return nil
	}
	bad := &plan.Plan{Name: "conf-invalid", NRanks: 1, Threads: 33, Groups: []plan.Group{{Blocks: 1}}}
	if prog, err := ex.Prepare(hal.PlanSpec{Plan: bad, DataType: plan.Uint8, Library: channels.DeviceLibrary()}); err == nil {
		prog.Close()
		return t.Errorf("Prepare of a plan with 33 threads per block succeeded; want an error wrapping %v", hal.ErrInvalidArgument)
	} else if e := want("Prepare of a plan with 33 threads per block", err, hal.ErrInvalidArgument); e != nil {
		return e
	}
	if prog, err := ex.Prepare(hal.PlanSpec{DataType: plan.Uint8}); err == nil {
		prog.Close()
		return t.Errorf("Prepare of a nil plan succeeded")
	} else if e := want("Prepare of a nil plan", err, hal.ErrInvalidArgument); e != nil {
		return e
	}
	// Every block of a plan must be resident at once (blocks wait for each
	// other's data), so a backend that runs blocks on multiprocessors
	// refuses at Prepare a plan it cannot hold: 64 blocks of 1024 threads
	// per multiprocessor are more than any GPU holds (2,048 threads per
	// multiprocessor on NVIDIA's and AMD's). The error must wrap
	// hal.ErrNotResident (itself an ErrInvalidArgument), the one weft.Comm
	// answers by taking the next plan on every rank. Backends that run
	// blocks in software (no device header) have no such limit.
	if mm, ok := t.Dev.(hal.MemoryMapped); ok && mm.DeviceHeader() != "" {
		sms := max(1, t.Dev.Info().Multiprocessors)
		crowd := copyPlan("conf-crowd", 64*sms, 1024)
		what := fmt.Sprintf("Prepare of a plan of %d blocks of 1024 threads on %d multiprocessors", 64*sms, sms)
		if prog, err := ex.Prepare(hal.PlanSpec{Plan: crowd, DataType: plan.Uint8, Library: channels.DeviceLibrary()}); err == nil {
			prog.Close()
			return t.Errorf("%s succeeded; want an error wrapping %v (its blocks cannot all be resident)", what, hal.ErrNotResident)
		} else if e := want(what, err, hal.ErrNotResident); e != nil {
			return e
		}
	}
	p := copyPlan("conf-args", 1, 64)
	res, err := t.SetupLocal(p)
	if err != nil {
		return err
	}
	prog, s, err := t.PrepareStream(p, res)
	if err != nil {
		return err
	}
	if e := want("Launch with a negative count", prog.Launch(s, &plan.Args{Count: -1, Input: b.Addr(), Output: b.Addr()}), hal.ErrInvalidArgument); e != nil {
		return e
	}
	if e := want("Launch with a null input buffer", prog.Launch(s, &plan.Args{Count: 16, Output: b.Addr()}), hal.ErrInvalidArgument); e != nil {
		return e
	}
	return t.Sync(s)
}

func testStreams(t *T) error {
	s, err := t.Stream()
	if err != nil {
		return err
	}
	const n = 4 * mib
	src, err := t.Alloc(n)
	if err != nil {
		return err
	}
	dst, err := t.Alloc(n)
	if err != nil {
		return err
	}
	if err := t.Write(src, 0, pattern(seed(t.Rank, 1), n)); err != nil {
		return err
	}
	p := copyPlan("conf-stream", 2, 256)
	res, err := t.SetupLocal(p)
	if err != nil {
		return err
	}
	prog, err := t.Prepare(p, res, plan.Uint8)
	if err != nil {
		return err
	}
	e0, err := s.Record()
	if err != nil {
		return t.Errorf("record: %w", err)
	}
	defer e0.Close()
	// Copy src→dst, then dst→src of a second pattern written after: stream
	// order makes the last copy win.
	if err := t.Launch(prog, s, &plan.Args{Count: n, Input: src.Addr(), Output: dst.Addr()}); err != nil {
		return err
	}
	e1, err := s.Record()
	if err != nil {
		return t.Errorf("record: %w", err)
	}
	defer e1.Close()
	if err := t.Launch(prog, s, &plan.Args{Count: n / 2, Input: dst.Addr() + n/4, Output: src.Addr()}); err != nil {
		return err
	}
	if err := e1.Synchronize(time.Now().Add(t.Timeout() + 30*time.Second)); err != nil {
		return t.Errorf("event synchronize: %w", err)
	}
	if err := t.Finish(s, res); err != nil {
		return err
	}
	d, err := e1.Elapsed(e0)
	if err != nil {
		return t.Errorf("elapsed: %w", err)
	}
	if d < 0 || d > time.Minute {
		return t.Errorf("elapsed time of a %d-byte copy is %v", n, d)
	}
	want := pattern(seed(t.Rank, 1), n)
	got, err := t.Read(dst, 0, n)
	if err != nil {
		return err
	}
	if e := diff("first copy", got, want); e != "" {
		return t.Errorf("%s", e)
	}
	got, err = t.Read(src, 0, n/2)
	if err != nil {
		return err
	}
	if e := diff("second copy (queued after the first on the same stream)", got, want[n/4:n/4+n/2]); e != "" {
		return t.Errorf("%s", e)
	}
	return nil
}

// testStreamAfter: work queued on a stream after After(prev) starts only
// once the work queued on prev before the call is done (a communicator
// relies on it to run calls on different streams in issue order). A copy
// of 32 MiB on one stream, then on a second stream, after After, a copy
// of the copy's destination: the second copy must read what the first
// wrote. Without the ordering the second stream's copy starts at once and
// reads the zeroed buffer. Also: After of the stream itself and of a
// closed stream order nothing and succeed.
func testStreamAfter(t *T) error {
	const n = 32 * mib
	p := copyPlan("conf-stream-after", 2, 256)
	res, err := t.SetupLocal(p)
	if err != nil {
		return err
	}
	prog, first, err := t.PrepareStream(p, res)
	if err != nil {
		return err
	}
	second, err := t.Stream()
	if err != nil {
		return err
	}
	var bufs [3]hal.Buffer // source, middle, destination
	for i := range bufs {
		if bufs[i], err = t.Alloc(n); err != nil {
			return err
		}
	}
	want := pattern(seed(t.Rank, 7), n)
	if err := t.Write(bufs[0], 0, want); err != nil {
		return err
	}
	if err := t.Launch(prog, first, &plan.Args{Count: n, Input: bufs[0].Addr(), Output: bufs[1].Addr()}); err != nil {
		return err
	}
	if err := second.After(first); err != nil {
		return t.Errorf("After(another stream of the device): %w", err)
	}
	if err := t.Launch(prog, second, &plan.Args{Count: n, Input: bufs[1].Addr(), Output: bufs[2].Addr()}); err != nil {
		return err
	}
	if err := t.Finish(second, res); err != nil {
		return err
	}
	if err := t.Finish(first, res); err != nil {
		return err
	}
	got, err := t.Read(bufs[2], 0, n)
	if err != nil {
		return err
	}
	if e := diff("copy queued on a second stream after After(first)", got, want); e != "" {
		return t.Errorf("%s: it ran before the first stream's copy finished", e)
	}
	if err := second.After(second); err != nil {
		return t.Errorf("After(the stream itself): %w, want nothing to order", err)
	}
	closed, err := t.Dev.NewStream()
	if err != nil {
		return t.Errorf("new stream: %w", err)
	}
	if err := closed.Close(); err != nil {
		return t.Errorf("close stream: %w", err)
	}
	if err := second.After(closed); err != nil {
		return t.Errorf("After(a closed stream): %w, want nothing to order", err)
	}
	return nil
}
