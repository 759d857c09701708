package host

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

var _ hal.StreamOps = (*Device)(nil)

// StreamOpsSupport implements hal.StreamOps: always nil.
func (d *Device) StreamOpsSupport() error { return nil }

// QueueOps implements hal.StreamOps: the operations run in order as one
// work item of the stream, on its goroutine, as a GPU's copy engine and
// front end would run them; lanes run concurrently, on goroutines forked
// when the work item starts and joined at its end, ordered against each
// other only by their flags, as on a GPU. Addresses are resolved and their mappings
// pinned at the call (an address no mapping covers fails now), so memory
// freed meanwhile aborts a wait instead of being touched after its unmap.
func (d *Device) QueueOps(hs hal.Stream, ops []hal.StreamOp) error {
	s, ok := hs.(*Stream)
	if !ok || s == nil || s.dev != d {
		return fmt.Errorf("host: queue stream operations on device %d: stream %T of another device: %w", d.cfg.Ordinal, hs, hal.ErrInvalidArgument)
	}
	type resolved struct {
		op             hal.StreamOp
		dst, src, src2 []byte
	}
	if err := hal.CheckStreamOps(ops); err != nil {
		return fmt.Errorf("host: queue stream operations on device %d: %w", d.cfg.Ordinal, err)
	}
	rs := make([]resolved, len(ops))
	var inUse []*guard
	for i, op := range ops {
		rs[i].op = op
		switch op.Kind {
		case hal.StreamCopy:
			if op.Bytes == 0 {
				continue
			}
			db, dr, err := d.resolveRegion(op.Dst, op.Bytes)
			if err != nil {
				return fmt.Errorf("host: stream operation %d (copy destination): %w", i, err)
			}
			sb, sr, err := d.resolveRegion(op.Src, op.Bytes)
			if err != nil {
				return fmt.Errorf("host: stream operation %d (copy source): %w", i, err)
			}
			rs[i].dst, rs[i].src = db, sb
			inUse = addGuard(addGuard(inUse, &dr.inUse), &sr.inUse)
		case hal.StreamReduce:
			if op.Bytes == 0 {
				continue
			}
			for _, a := range []struct {
				addr uint64
				into *[]byte
				what string
			}{{op.Dst, &rs[i].dst, "destination"}, {op.Src, &rs[i].src, "source"}, {op.Src2, &rs[i].src2, "second source"}} {
				b, r, err := d.resolveRegion(a.addr, op.Bytes)
				if err != nil {
					return fmt.Errorf("host: stream operation %d (reduce %s): %w", i, a.what, err)
				}
				*a.into = b
				inUse = addGuard(inUse, &r.inUse)
			}
		case hal.StreamWaitEq, hal.StreamWrite:
			b, r, err := d.resolveRegion(op.Dst, 8)
			if err != nil {
				return fmt.Errorf("host: stream operation %d (flag): %w", i, err)
			}
			rs[i].dst = b
			inUse = addGuard(inUse, &r.inUse)
		}
	}
	u := &opsUser{}
	for _, op := range ops {
		if op.Kind == hal.StreamWaitEq {
			u.waits = append(u.waits, op)
		}
	}
	if len(u.waits) > 0 {
		d.waiting.add(u)
	}
	timeout := env.Timeout()
	lanes := 1
	for _, op := range ops {
		lanes = max(lanes, int(op.Lane)+1)
	}
	// runLane runs the operations of one lane in list order. Their
	// ordering against other lanes is only what the flags give, as on a
	// GPU: the atomic store of a flag after a copy and the atomic load that
	// sees it order the copy before what follows the wait.
	runLane := func(lane uint8) error {
		for i, r := range rs {
			if r.op.Lane != lane {
				continue
			}
			switch r.op.Kind {
			case hal.StreamCopy:
				copy(r.dst, r.src)
			case hal.StreamReduce:
				streamReduce(r.dst, r.src, r.src2, r.op)
			case hal.StreamWrite:
				atomic.StoreUint64(word(r.dst), r.op.Value)
			case hal.StreamWaitEq:
				if err := u.wait(word(r.dst), r.op, timeout); err != nil {
					err = fmt.Errorf("host: stream operation %d of %d (lane %d) on device %d: %w", i, len(rs), lane, d.cfg.Ordinal, err)
					d.waiting.fail(u, err)
					return err
				}
			}
		}
		return nil
	}
	run := func() error {
		defer d.waiting.remove(u)
		if lanes == 1 {
			return runLane(0)
		}
		// Lanes fork when the work item starts (after the stream's
		// earlier work) and join at its end.
		errs := make([]error, lanes)
		var wg sync.WaitGroup
		for k := 1; k < lanes; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if errs[k] = runLane(uint8(k)); errs[k] != nil {
					u.abort("another lane of the batch failed")
				}
			}()
		}
		if errs[0] = runLane(0); errs[0] != nil {
			u.abort("another lane of the batch failed")
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err // the first lane's failure; the others' are its aborts
			}
		}
		return nil
	}
	return s.enqueueWork(work{run: run, user: u, inUse: inUse, what: "memory of queued stream operations"})
}

// streamReduce computes dst = src ⊕ src2 (hal.StreamReduce) in that
// operand order (Max and Min of +0 and −0 depend on it): by a copy of src
// into dst and a reduction of src2 into it, src2 first set aside where dst
// is src2.
func streamReduce(dst, src, src2 []byte, op hal.StreamOp) {
	if len(dst) == 0 {
		return
	}
	if &dst[0] == &src2[0] && &dst[0] != &src[0] {
		src2 = slices.Clone(src2)
	}
	copy(dst, src)
	reduceInto(dst, src2, op.Type, op.Op)
}

// word is the 64-bit word at the start of b (8 bytes, 8-byte aligned).
func word(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(&b[0])) }

// opsUser is queued stream operations as a user of the mappings they
// touch: freeing one aborts a wait that would otherwise spin on it.
type opsUser struct {
	aborted atomic.Bool
	mu      sync.Mutex
	why     string
	waits   []hal.StreamOp // the batch's waits
}

// opsWaiting is the batches with waits of a device not yet run to their
// end, for AbortWaits.
type opsWaiting struct {
	mu     sync.Mutex
	users  map[*opsUser]struct{}
	failed []failedBatch // for WaitsFailed
}

// failedBatch is a batch whose wait failed: its error and the addresses
// it waited on.
type failedBatch struct {
	err   error
	waits []hal.StreamOp
}

func (w *opsWaiting) fail(u *opsUser, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failed = append(w.failed, failedBatch{err: err, waits: u.waits})
}

func (w *opsWaiting) add(u *opsUser) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.users == nil {
		w.users = map[*opsUser]struct{}{}
	}
	w.users[u] = struct{}{}
}

func (w *opsWaiting) remove(u *opsUser) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.users, u)
}

// WaitsFailed implements hal.StreamOps.
func (d *Device) WaitsFailed(b hal.Buffer) error {
	w := &d.waiting
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.failed {
		if hal.WaitsOn(f.waits, b) {
			return f.err
		}
	}
	return nil
}

// AbortWaits implements hal.StreamOps: the batches with a wait on a word
// of b give up their waits now (the work fails with ErrInvalidUsage and
// runs no further operation).
func (d *Device) AbortWaits(b hal.Buffer) {
	w := &d.waiting
	w.mu.Lock()
	defer w.mu.Unlock()
	for u := range w.users {
		if hal.WaitsOn(u.waits, b) {
			u.abort("aborted (hal.StreamOps.AbortWaits)")
		}
	}
}

func (u *opsUser) abort(why string) {
	u.mu.Lock()
	u.why = why
	u.mu.Unlock()
	u.aborted.Store(true)
}

// wait polls the word until it equals op.Value: spinning briefly, then
// sleeping with a backoff of at most 100 µs; it gives up when the memory is
// being freed or after timeout.
func (u *opsUser) wait(p *uint64, op hal.StreamOp, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	nap := time.Microsecond
	for i := 0; ; i++ {
		v := atomic.LoadUint64(p)
		if v == op.Value {
			return nil
		}
		if u.aborted.Load() {
			u.mu.Lock()
			why := u.why
			u.mu.Unlock()
			return fmt.Errorf("wait at %#x for %d aborted (%s): %w", op.Dst, op.Value, why, hal.ErrInvalidUsage)
		}
		if i < 256 {
			runtime.Gosched()
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait at %#x timed out after %v: expected %d, observed %d: %w", op.Dst, timeout, op.Value, v, hal.ErrTimeout)
		}
		time.Sleep(nap)
		nap = min(2*nap, 100*time.Microsecond)
	}
}
