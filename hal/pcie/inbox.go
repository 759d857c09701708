package pcie

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
)

// An inbox is the shared host memory through which one sender engine
// passes requests to one receiving device, as NCCL's SHM transport does:
// a header of counters, a ring of descriptors and a ring of staging slots.
// Both processes map it; every counter has one writer.
//
//	off   field (little-endian 64-bit words unless noted)
//	  0   magic "WEFTPCX1"
//	  8   version (u32), slots (u32)
//	 16   slot size in bytes
//	 24   descriptors (u32)
//	 32   sender pid
//	 64   head: descriptors published (sender)
//	128   closed: 1 once the sender publishes no more (sender)
//	192   tail: descriptors consumed (receiver)
//	256   freed: staging slots released (receiver)
//	320   failure code, 0 while healthy (receiver)
//	512   descriptors, 64 bytes each
//	      staging slots, from the next 4 KiB boundary
//
// A descriptor is {kind u32, slot u32, a, b, c, d, seq u64}: data (kind 1)
// copies b bytes from slot to the receiver's address a; signal (kind 2)
// stores c at the receiver's address b (unless b is 0) and then d at the
// semaphore address a. seq is the descriptor's number plus one. The
// sender writes a descriptor and then releases head; the receiver acquires
// head, reads the descriptor, and releases tail. Slots are used in ring
// order by data descriptors, and freed in the same order once the copy
// out of them has completed.
const (
	inboxMagic   = 0x3158504354464557 // "WEFTPCX1"
	inboxVersion = 1

	offMagic     = 0
	offVersion   = 8
	offSlotBytes = 16
	offDescs     = 24
	offSenderPID = 32
	offHead      = 64
	offClosed    = 128
	offTail      = 192
	offFreed     = 256
	offRxErr     = 320
	offDescTable = 512
	descBytes    = 64

	descData   = 1
	descSignal = 2
)

// Failure codes a receiver leaves in an inbox.
const (
	rxErrCorrupt = 1 + iota // a descriptor out of protocol
	rxErrRange              // a destination outside the buffers the receiver exported for ports
	rxErrDevice             // a CUDA call of the receiver failed
	rxErrClosed             // the receiving device was closed
)

func rxErrText(code uint64) string {
	switch code {
	case rxErrCorrupt:
		return "a descriptor broke the inbox protocol"
	case rxErrRange:
		return "a destination is outside the buffers it exported for ports"
	case rxErrDevice:
		return "a copy or signal failed on its GPU"
	case rxErrClosed:
		return "it was closed"
	}
	return fmt.Sprintf("failure code %d", code)
}

// geometry is the shape of an inbox.
type geometry struct {
	slots     int
	slotBytes int64
	descs     int
}

// defaultGeometry: 8 staging slots of 4 MiB (NCCL's SHM transport stages
// through a few MiB per peer too) and 64 descriptors.
var defaultGeometry = geometry{slots: 8, slotBytes: 4 << 20, descs: 64}

func (g geometry) slotsOffset() int64 {
	return (offDescTable + int64(g.descs)*descBytes + 4095) &^ 4095
}

// size is the inbox's length in bytes.
func (g geometry) size() int64 { return g.slotsOffset() + int64(g.slots)*g.slotBytes }

func (g geometry) valid() bool {
	return g.slots > 0 && g.slots <= 1<<16 && g.descs > 0 && g.descs <= 1<<16 && g.slotBytes >= 64 && g.slotBytes <= 1<<30 && g.slotBytes%64 == 0
}

// inbox is an inbox mapped in this process.
type inbox struct {
	mem []byte
	g   geometry
}

func (b *inbox) word(off int64) *uint64 { return (*uint64)(unsafe.Pointer(&b.mem[off])) }

func (b *inbox) load(off int64) uint64     { return atomic.LoadUint64(b.word(off)) }
func (b *inbox) store(off int64, v uint64) { atomic.StoreUint64(b.word(off), v) }

// slot returns staging slot i.
func (b *inbox) slot(i int) []byte {
	off := b.g.slotsOffset() + int64(i)*b.g.slotBytes
	return b.mem[off : off+b.g.slotBytes : off+b.g.slotBytes]
}

// initInbox writes the header of a new inbox into mem, which must be at
// least g.size() bytes of zeroes.
func initInbox(mem []byte, g geometry, senderPID int) (*inbox, error) {
	if !g.valid() || int64(len(mem)) < g.size() || uintptr(unsafe.Pointer(&mem[0]))%64 != 0 {
		return nil, fmt.Errorf("pcie: inbox of %d bytes for geometry %+v: %w", len(mem), g, hal.ErrInvalidArgument)
	}
	b := &inbox{mem: mem, g: g}
	b.store(offVersion, inboxVersion|uint64(g.slots)<<32)
	b.store(offSlotBytes, uint64(g.slotBytes))
	b.store(offDescs, uint64(g.descs))
	b.store(offSenderPID, uint64(senderPID))
	b.store(offMagic, inboxMagic)
	return b, nil
}

// openInbox validates the header of an inbox another party initialised.
// Errors wrap hal.ErrRemote.
func openInbox(mem []byte) (*inbox, error) {
	if len(mem) < offDescTable || uintptr(unsafe.Pointer(&mem[0]))%64 != 0 {
		return nil, fmt.Errorf("pcie: inbox of %d bytes is too short: %w", len(mem), hal.ErrRemote)
	}
	b := &inbox{mem: mem}
	if m := b.load(offMagic); m != inboxMagic {
		return nil, fmt.Errorf("pcie: inbox has magic %#x, want %#x (not initialised, or another weft version): %w", m, uint64(inboxMagic), hal.ErrRemote)
	}
	v := b.load(offVersion)
	if uint32(v) != inboxVersion {
		return nil, fmt.Errorf("pcie: inbox format version %d, this build reads %d: %w", uint32(v), inboxVersion, hal.ErrRemote)
	}
	b.g = geometry{slots: int(v >> 32), slotBytes: int64(b.load(offSlotBytes)), descs: int(uint32(b.load(offDescs)))}
	if !b.g.valid() || int64(len(mem)) < b.g.size() {
		return nil, fmt.Errorf("pcie: inbox geometry %+v does not fit its %d bytes: %w", b.g, len(mem), hal.ErrRemote)
	}
	return b, nil
}

// desc is a decoded descriptor.
type desc struct {
	kind       uint32
	slot       uint32
	a, b, c, d uint64
	seq        uint64
}

func (b *inbox) descOffset(n uint64) int64 {
	return offDescTable + int64(n%uint64(b.g.descs))*descBytes
}

func (b *inbox) writeDesc(n uint64, x desc) {
	off := b.descOffset(n)
	b.store(off, uint64(x.kind)|uint64(x.slot)<<32)
	b.store(off+8, x.a)
	b.store(off+16, x.b)
	b.store(off+24, x.c)
	b.store(off+32, x.d)
	b.store(off+40, n+1)
}

func (b *inbox) readDesc(n uint64) desc {
	off := b.descOffset(n)
	w := b.load(off)
	return desc{kind: uint32(w), slot: uint32(w >> 32), a: b.load(off + 8), b: b.load(off + 16), c: b.load(off + 24), d: b.load(off + 32), seq: b.load(off + 40)}
}

// ---- sender -----------------------------------------------------------------

// stager moves bytes for a sender. Completion i (an index of the sender's
// in-flight ring) is recorded after each queued copy; done reports it
// without blocking. The CUDA stager is a stream with an event per index.
type stager interface {
	// stage queues a copy of len(slot) bytes from device address src into
	// slot (host memory) and records completion i.
	stage(i int, slot []byte, src uint64) error
	// copyLocal queues a device-to-device copy and records completion i.
	copyLocal(i int, dst, src uint64, n int64) error
	done(i int) (bool, error)
}

// sendFlights is the capacity of a sender's in-flight ring: staged pieces
// (at most the inbox's slots), local copies and signals not yet published.
const sendFlights = 64

type opKind uint8

const (
	opPut opKind = iota + 1
	opCopy
	opSignal
)

// op is a request not yet wholly handed to the stager. For a signal, dst
// is the semaphore, src the count word, n the count and value the
// semaphore's new value.
type op struct {
	kind     opKind
	dst, src uint64
	n        int64
	count    uint64
	value    uint64
	seq      uint64
}

// flight is a request handed to the stager (or a signal) that is waiting
// for its copy to complete and its descriptor to be published.
type flight struct {
	kind  opKind
	slot  uint32
	dst   uint64
	n     int64
	src   uint64 // signal: count word
	count uint64
	value uint64
	seq   uint64
	last  bool // the op's last piece
}

// sender is the sending half of the inbox protocol, with requests queued
// without bound (growing only when full) so that no method blocks: a put
// waits in the queue for free staging slots, a published descriptor for a
// free descriptor entry. Requests move on whenever progress runs: from
// every method, and from the device's progress goroutine (tryProgress), so
// that a signal is published even when the proxy calls nothing more.
type sender struct {
	mu   sync.Mutex
	box  *inbox
	st   stager
	name string // for messages

	ops             []op // ring
	opHead, opCount int

	fl              [sendFlights]flight
	flHead, flCount int

	slotsUsed uint64 // slots staged into, ever
	published uint64 // descriptors published (= head)
	seq       uint64 // requests queued, ever
	doneSeq   uint64 // requests complete at the source, in order

	tickets      hal.Tickets   // over seq and doneSeq
	completedPub atomic.Uint64 // tickets.Completed(), for readers that find the lock taken

	mirrors map[uint64]uint64 // semaphore -> value last sent

	err    error
	closed bool
}

func newSender(box *inbox, st stager, name string) *sender {
	return &sender{box: box, st: st, name: name, ops: make([]op, 64), tickets: hal.MakeTickets(64), mirrors: map[uint64]uint64{}}
}

func (s *sender) check(what string) error {
	if s.closed {
		return fmt.Errorf("%s: %s is closed: %w", what, s.name, hal.ErrInvalidUsage)
	}
	return s.err
}

func (s *sender) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return s.err
}

func (s *sender) push(o op) {
	if s.opCount == len(s.ops) {
		grown := make([]op, 2*len(s.ops))
		for i := 0; i < s.opCount; i++ {
			grown[i] = s.ops[(s.opHead+i)%len(s.ops)]
		}
		s.ops, s.opHead = grown, 0
	}
	s.seq++
	o.seq = s.seq
	s.ops[(s.opHead+s.opCount)%len(s.ops)] = o
	s.opCount++
}

func (s *sender) enqueue(what string, o op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(what); err != nil {
		return err
	}
	if o.kind != opSignal && o.n < 0 {
		return fmt.Errorf("%s of %d bytes on %s: %w", what, o.n, s.name, hal.ErrInvalidArgument)
	}
	if o.kind == opSignal {
		if o.dst == 0 || o.dst%8 != 0 || o.src%8 != 0 {
			return fmt.Errorf("signal on %s: semaphore %#x and count word %#x must be non-null (semaphore) and 8-byte aligned: %w", s.name, o.dst, o.src, hal.ErrInvalidArgument)
		}
		o.value = s.mirrors[o.dst] + 1
		s.mirrors[o.dst] = o.value
	} else if o.n == 0 {
		return nil
	}
	s.push(o)
	s.progressLocked()
	return s.err
}

func (s *sender) put(dst, src uint64, n int64) error {
	return s.enqueue("put", op{kind: opPut, dst: dst, src: src, n: n})
}

func (s *sender) copyLocal(dst, src uint64, n int64) error {
	return s.enqueue("copy", op{kind: opCopy, dst: dst, src: src, n: n})
}

func (s *sender) signal(sem, countAddr, count uint64) error {
	return s.enqueue("signal", op{kind: opSignal, dst: sem, src: countAddr, count: count})
}

// mark returns a ticket covering the requests queued so far.
func (s *sender) mark() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("mark"); err != nil {
		return 0, err
	}
	s.progressLocked()
	t, _ := s.tickets.Mark(s.seq, s.doneSeq)
	s.completedPub.Store(s.tickets.Completed())
	return t, s.err
}

// completedTicket returns the largest ticket whose requests have all left
// their source buffers. It does not wait for the lock: when the progress
// goroutine holds it, the last published value is returned.
func (s *sender) completedTicket() (uint64, error) {
	if !s.mu.TryLock() {
		return s.completedPub.Load(), nil
	}
	defer s.mu.Unlock()
	if s.closed {
		return s.tickets.Completed(), fmt.Errorf("completed: %s is closed: %w", s.name, hal.ErrInvalidUsage)
	}
	s.progressLocked()
	return s.tickets.Completed(), s.err
}

// tryProgress moves requests on if nobody else holds the sender; it
// reports whether anything is still queued or in flight.
func (s *sender) tryProgress() (busy bool) {
	if !s.mu.TryLock() {
		return true
	}
	defer s.mu.Unlock()
	s.progressLocked()
	return s.err == nil && (s.opCount > 0 || s.flCount > 0)
}

func (s *sender) progressLocked() {
	if s.err != nil {
		return
	}
	if code := s.box.load(offRxErr); code != 0 {
		s.fail(fmt.Errorf("%s: the receiver reports that %s: %w", s.name, rxErrText(code), hal.ErrRemote))
		return
	}
	s.retire()
	s.issue()
	s.retire()
	s.completedPub.Store(s.tickets.Advance(s.doneSeq))
}

// issue hands queued requests to the stager, in order, while staging
// slots and in-flight entries are free.
func (s *sender) issue() {
	for s.opCount > 0 && s.err == nil {
		o := &s.ops[s.opHead]
		switch o.kind {
		case opPut:
			for o.n > 0 {
				if s.flCount == sendFlights || s.slotsUsed-s.box.load(offFreed) >= uint64(s.box.g.slots) {
					return
				}
				piece := min(o.n, s.box.g.slotBytes)
				slot := int(s.slotsUsed % uint64(s.box.g.slots))
				i := (s.flHead + s.flCount) % sendFlights
				if err := s.st.stage(i, s.box.slot(slot)[:piece], o.src); err != nil {
					s.fail(fmt.Errorf("%s: stage %d bytes from %#x: %w", s.name, piece, o.src, err))
					return
				}
				s.fl[i] = flight{kind: opPut, slot: uint32(slot), dst: o.dst, n: piece, seq: o.seq, last: piece == o.n}
				s.flCount++
				s.slotsUsed++
				o.src += uint64(piece)
				o.dst += uint64(piece)
				o.n -= piece
			}
		case opCopy:
			if s.flCount == sendFlights {
				return
			}
			i := (s.flHead + s.flCount) % sendFlights
			if err := s.st.copyLocal(i, o.dst, o.src, o.n); err != nil {
				s.fail(fmt.Errorf("%s: copy %d bytes from %#x to %#x: %w", s.name, o.n, o.src, o.dst, err))
				return
			}
			s.fl[i] = flight{kind: opCopy, seq: o.seq, last: true}
			s.flCount++
		case opSignal:
			if s.flCount == sendFlights {
				return
			}
			i := (s.flHead + s.flCount) % sendFlights
			s.fl[i] = flight{kind: opSignal, dst: o.dst, src: o.src, count: o.count, value: o.value, seq: o.seq, last: true}
			s.flCount++
		}
		s.opHead = (s.opHead + 1) % len(s.ops)
		s.opCount--
	}
}

// retire publishes, in order, the descriptors of in-flight requests whose
// copies have completed.
func (s *sender) retire() {
	for s.flCount > 0 && s.err == nil {
		f := &s.fl[s.flHead]
		if f.kind != opSignal {
			done, err := s.st.done(s.flHead)
			if err != nil {
				s.fail(fmt.Errorf("%s: %w", s.name, err))
				return
			}
			if !done {
				return
			}
		}
		if f.kind != opCopy {
			if s.published-s.box.load(offTail) >= uint64(s.box.g.descs) {
				return
			}
			d := desc{kind: descData, slot: f.slot, a: f.dst, b: uint64(f.n)}
			if f.kind == opSignal {
				d = desc{kind: descSignal, a: f.dst, b: f.src, c: f.count, d: f.value}
			}
			s.box.writeDesc(s.published, d)
			s.published++
			s.box.store(offHead, s.published)
		}
		if f.last {
			s.doneSeq = f.seq
		}
		s.flHead = (s.flHead + 1) % sendFlights
		s.flCount--
	}
}

// drain moves requests on until none is queued or in flight, or the
// deadline passes (hal.ErrTimeout), and then tells the receiver that the
// inbox is closed. Later calls fail with hal.ErrInvalidUsage.
func (s *sender) drain(deadline time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("close %s: already closed: %w", s.name, hal.ErrInvalidUsage)
	}
	s.closed = true
	sleep := time.Microsecond
	for {
		s.progressLocked()
		if s.err != nil {
			break
		}
		if s.opCount == 0 && s.flCount == 0 {
			break
		}
		if time.Now().After(deadline) {
			s.err = fmt.Errorf("close %s: %d requests queued and %d in flight at the deadline (receiver consumed %d of %d descriptors): %w",
				s.name, s.opCount, s.flCount, s.box.load(offTail), s.published, hal.ErrTimeout)
			break
		}
		s.mu.Unlock()
		time.Sleep(sleep)
		sleep = min(2*sleep, 100*time.Microsecond)
		s.mu.Lock()
	}
	s.box.store(offClosed, 1)
	return s.err
}

// ---- receiver ---------------------------------------------------------------

// unstager moves bytes for a receiver: copies out of staging slots into
// device memory, and the stores of signals, in one order (a CUDA stream).
type unstager interface {
	// unstage queues a copy of slot into device address dst and records
	// completion i (an index below the inbox's slot count).
	unstage(i int, dst uint64, slot []byte) error
	done(i int) (bool, error)
	// signal queues count stored at countAddr (unless 0) and then value at
	// semAddr, after every copy queued before.
	signal(countAddr, count, semAddr, value uint64) error
}

// receiver is the receiving half of the inbox protocol; one goroutine
// (the device's progress goroutine) polls it.
type receiver struct {
	box   *inbox
	u     unstager
	name  string
	valid func(addr uint64, n int64) bool // destinations this device accepts

	tail            uint64 // descriptors consumed
	freed           uint64 // slots freed
	flHead, flCount int    // copies out of slots in flight (slots freed+i)
	err             error
}

func newReceiver(box *inbox, u unstager, name string, valid func(uint64, int64) bool) *receiver {
	return &receiver{box: box, u: u, name: name, valid: valid, tail: box.load(offTail), freed: box.load(offFreed)}
}

// poll frees the slots whose copies completed and starts the work of
// newly published descriptors. It reports whether it did anything. A
// failure is kept (and left in the inbox for the sender); the receiver
// then does nothing more.
func (r *receiver) poll() (work bool) {
	if r.err != nil {
		return false
	}
	for r.flCount > 0 {
		done, err := r.u.done(r.flHead)
		if err != nil {
			r.fail(rxErrDevice, fmt.Errorf("%s: %w", r.name, err))
			return true
		}
		if !done {
			break
		}
		r.flHead = (r.flHead + 1) % r.box.g.slots
		r.flCount--
		r.freed++
		r.box.store(offFreed, r.freed)
		work = true
	}
	head := r.box.load(offHead)
	for r.tail < head && r.err == nil {
		d := r.box.readDesc(r.tail)
		if d.seq != r.tail+1 {
			r.fail(rxErrCorrupt, fmt.Errorf("%s: descriptor %d carries number %d: %w", r.name, r.tail+1, d.seq, hal.ErrRemote))
			return true
		}
		switch d.kind {
		case descData:
			want := (r.freed + uint64(r.flCount)) % uint64(r.box.g.slots)
			if r.flCount == r.box.g.slots || uint64(d.slot) != want || d.b == 0 || d.b > uint64(r.box.g.slotBytes) {
				r.fail(rxErrCorrupt, fmt.Errorf("%s: data descriptor %d names slot %d (expected %d) and %d bytes (slots of %d): %w",
					r.name, r.tail+1, d.slot, want, d.b, r.box.g.slotBytes, hal.ErrRemote))
				return true
			}
			if !r.valid(d.a, int64(d.b)) {
				r.fail(rxErrRange, fmt.Errorf("%s: descriptor %d puts %d bytes at %#x, outside the buffers exported for ports: %w", r.name, r.tail+1, d.b, d.a, hal.ErrRemote))
				return true
			}
			i := (r.flHead + r.flCount) % r.box.g.slots
			if err := r.u.unstage(i, d.a, r.box.slot(int(d.slot))[:d.b]); err != nil {
				r.fail(rxErrDevice, fmt.Errorf("%s: copy %d bytes to %#x: %w", r.name, d.b, d.a, err))
				return true
			}
			r.flCount++
		case descSignal:
			if !r.valid(d.a, 8) || (d.b != 0 && !r.valid(d.b, 8)) || d.a%8 != 0 || d.b%8 != 0 {
				r.fail(rxErrRange, fmt.Errorf("%s: signal descriptor %d names semaphore %#x and count word %#x, outside the buffers exported for ports: %w", r.name, r.tail+1, d.a, d.b, hal.ErrRemote))
				return true
			}
			if err := r.u.signal(d.b, d.c, d.a, d.d); err != nil {
				r.fail(rxErrDevice, fmt.Errorf("%s: signal of %#x: %w", r.name, d.a, err))
				return true
			}
		default:
			r.fail(rxErrCorrupt, fmt.Errorf("%s: descriptor %d has kind %d: %w", r.name, r.tail+1, d.kind, hal.ErrRemote))
			return true
		}
		r.tail++
		r.box.store(offTail, r.tail)
		work = true
	}
	return work
}

func (r *receiver) fail(code uint64, err error) {
	r.err = err
	r.box.store(offRxErr, code)
}

// finished reports whether the sender has closed the inbox and every
// request in it is done (or the receiver failed).
func (r *receiver) finished() bool {
	return r.err != nil || (r.box.load(offClosed) != 0 && r.tail == r.box.load(offHead) && r.flCount == 0)
}
