package pcie

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/weftccl/weft/hal"
)

// shmDir holds the inbox files; tests point it elsewhere.
var shmDir = "/dev/shm"

// pinner page-locks a mapping for the GPU (cuMemHostRegister with
// PORTABLE|DEVICEMAP) and undoes it; nil for mappings only the CPU uses.
type pinner interface {
	pin(mem []byte) error
	unpin(mem []byte) error
}

// shmMap is a shared-memory file mapped in this process. A file opened
// twice in one process (a sender and a receiver on two GPUs of the
// process) shares one mapping, and one registration with CUDA, counted.
type shmMap struct {
	path string
	mem  []byte
	refs int
	pin  pinner
}

var shmMaps struct {
	sync.Mutex
	m map[string]*shmMap
}

// mapShm maps the file at path: created (it must not exist) and sized
// when create, else opened as it is, and then pinned with p unless p is
// nil. Errors wrap hal.ErrSystem, or hal.ErrRemote for an existing file
// shorter than size.
func mapShm(path string, size int64, create bool, p pinner) (*shmMap, error) {
	shmMaps.Lock()
	defer shmMaps.Unlock()
	if m := shmMaps.m[path]; m != nil {
		if int64(len(m.mem)) < size {
			return nil, fmt.Errorf("pcie: %s is mapped with %d bytes, want %d: %w", path, len(m.mem), size, hal.ErrRemote)
		}
		m.refs++
		return m, nil
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pcie: open %s: %v: %w", path, err, hal.ErrSystem)
	}
	defer f.Close()
	if create {
		if err := f.Truncate(size); err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("pcie: size %s to %d bytes: %v (is %s full?): %w", path, size, err, shmDir, hal.ErrSystem)
		}
	} else if st, err := f.Stat(); err != nil || st.Size() < size {
		return nil, fmt.Errorf("pcie: %s is shorter than %d bytes (%v): %w", path, size, err, hal.ErrRemote)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		if create {
			os.Remove(path)
		}
		return nil, fmt.Errorf("pcie: map %s: %v: %w", path, err, hal.ErrSystem)
	}
	if p != nil {
		if err := p.pin(mem); err != nil {
			syscall.Munmap(mem)
			if create {
				os.Remove(path)
			}
			return nil, fmt.Errorf("pcie: pin %s: %w", path, err)
		}
	}
	m := &shmMap{path: path, mem: mem, refs: 1, pin: p}
	if shmMaps.m == nil {
		shmMaps.m = map[string]*shmMap{}
	}
	shmMaps.m[path] = m
	return m, nil
}

// release drops a reference; the last one unpins and unmaps.
func (m *shmMap) release() error { return m.releaseWith(nil) }

// releaseWith is release, unpinning with p (when not nil) rather than the
// pinner that pinned: a registration is process-wide (PORTABLE), and the
// GPU that made it may have been closed since.
func (m *shmMap) releaseWith(p pinner) error {
	shmMaps.Lock()
	defer shmMaps.Unlock()
	if m.refs--; m.refs > 0 {
		return nil
	}
	delete(shmMaps.m, m.path)
	var errs []error
	if m.pin != nil {
		if p == nil {
			p = m.pin
		}
		errs = append(errs, p.unpin(m.mem))
	}
	if err := syscall.Munmap(m.mem); err != nil {
		errs = append(errs, fmt.Errorf("pcie: unmap %s: %v: %w", m.path, err, hal.ErrSystem))
	}
	return errors.Join(errs...)
}

// The index of a receiving device is a small shared file through which
// senders announce their inboxes: entries that a sender claims, fills in
// and marks ready, and that the receiver takes and, once the inbox is
// closed and drained, frees. Its name carries the job, the receiving GPU
// and process; an inbox's name is the index's and a random nonce.
//
//	off        field (64-bit words)
//	0          magic "WEFTPCI1"
//	8          generation: incremented after each announcement
//	64 + 64 i  entry i: state, nonce, sender pid, sender ordinal
const (
	indexMagic   = 0x3149435054464557 // "WEFTPCI1"
	indexEntries = 256
	indexSize    = 64 + indexEntries*64

	entryFree    = 0
	entryClaimed = 1 // a sender is creating the inbox
	entryReady   = 2 // the inbox file exists and is initialised
	entryTaken   = 3 // the receiver has opened it
)

// indexPath names the index of GPU uuid in process pid of job.
func indexPath(job uint64, uuid string, pid int) string {
	return filepath.Join(shmDir, fmt.Sprintf("weft-pcie-%016x-%s-%d", job, strings.TrimPrefix(uuid, "GPU-"), pid))
}

func inboxPath(index string, nonce uint64) string { return fmt.Sprintf("%s-%016x", index, nonce) }

type index struct {
	m *shmMap
}

// openIndex opens or creates the index at path. Both sides call it; the
// first creates the file, and whichever maps it first writes the magic.
func openIndex(path string) (*index, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pcie: open index %s: %v: %w", path, err, hal.ErrSystem)
	}
	st, err := f.Stat()
	if err == nil && st.Size() < indexSize {
		err = f.Truncate(indexSize)
	}
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("pcie: size index %s: %v: %w", path, err, hal.ErrSystem)
	}
	m, err := mapShm(path, indexSize, false, nil)
	if err != nil {
		return nil, err
	}
	x := &index{m: m}
	if !atomic.CompareAndSwapUint64(x.word(0), 0, indexMagic) && atomic.LoadUint64(x.word(0)) != indexMagic {
		m.release()
		return nil, fmt.Errorf("pcie: %s is not a weft inbox index: %w", path, hal.ErrRemote)
	}
	return x, nil
}

func (x *index) word(off int64) *uint64 { return (*uint64)(unsafe.Pointer(&x.m.mem[off])) }

func (x *index) entry(i int, field int64) *uint64 { return x.word(64 + int64(i)*64 + 8*field) }

func (x *index) generation() uint64 { return atomic.LoadUint64(x.word(8)) }

// announce creates an inbox for a sender: it claims a free entry, creates
// and maps the inbox file (pinned with p), initialises it, and marks the
// entry ready. Errors wrap hal.ErrSystem (index full, file errors).
func (x *index) announce(g geometry, senderPID, senderOrdinal int, p pinner) (*inbox, *shmMap, error) {
	for i := 0; i < indexEntries; i++ {
		if !atomic.CompareAndSwapUint64(x.entry(i, 0), entryFree, entryClaimed) {
			continue
		}
		var nb [8]byte
		rand.Read(nb[:])
		nonce := binary.LittleEndian.Uint64(nb[:])
		m, err := mapShm(inboxPath(x.m.path, nonce), g.size(), true, p)
		if err != nil {
			atomic.StoreUint64(x.entry(i, 0), entryFree)
			return nil, nil, err
		}
		box, err := initInbox(m.mem, g, senderPID)
		if err != nil {
			m.release()
			os.Remove(inboxPath(x.m.path, nonce))
			atomic.StoreUint64(x.entry(i, 0), entryFree)
			return nil, nil, err
		}
		atomic.StoreUint64(x.entry(i, 1), nonce)
		atomic.StoreUint64(x.entry(i, 2), uint64(senderPID))
		atomic.StoreUint64(x.entry(i, 3), uint64(senderOrdinal))
		atomic.StoreUint64(x.entry(i, 0), entryReady)
		atomic.AddUint64(x.word(8), 1)
		return box, m, nil
	}
	return nil, nil, fmt.Errorf("pcie: inbox index %s is full (%d engines send to that GPU): %w", x.m.path, indexEntries, hal.ErrSystem)
}

// announced is an inbox a receiver has taken.
type announced struct {
	entry     int
	box       *inbox
	m         *shmMap
	senderPID int
	ordinal   int
}

// take opens the inboxes announced since the last call: maps each (pinned
// with p), validates its header, unlinks its file (both sides hold it
// mapped) and marks its entry taken. An inbox that fails to open is
// reported in errs and its entry freed.
func (x *index) take(p pinner) (got []announced, errs []error) {
	for i := 0; i < indexEntries; i++ {
		if atomic.LoadUint64(x.entry(i, 0)) != entryReady {
			continue
		}
		path := inboxPath(x.m.path, atomic.LoadUint64(x.entry(i, 1)))
		a := announced{entry: i, senderPID: int(atomic.LoadUint64(x.entry(i, 2))), ordinal: int(atomic.LoadUint64(x.entry(i, 3)))}
		var m *shmMap
		st, err := os.Stat(path)
		if err != nil {
			err = fmt.Errorf("pcie: announced inbox %s: %v: %w", path, err, hal.ErrRemote)
		} else if m, err = mapShm(path, st.Size(), false, p); err == nil {
			if a.box, err = openInbox(m.mem); err != nil {
				m.release()
			}
		}
		os.Remove(path)
		if err != nil {
			errs = append(errs, err)
			atomic.StoreUint64(x.entry(i, 0), entryFree)
			continue
		}
		a.m = m
		atomic.StoreUint64(x.entry(i, 0), entryTaken)
		got = append(got, a)
	}
	return got, errs
}

// free returns a taken entry to the senders.
func (x *index) free(entry int) { atomic.StoreUint64(x.entry(entry, 0), entryFree) }

// close unmaps the index; remove also unlinks it, with the inbox files
// of entries announced and never taken.
func (x *index) close(remove bool) error {
	if remove {
		for i := 0; i < indexEntries; i++ {
			if atomic.LoadUint64(x.entry(i, 0)) == entryReady {
				os.Remove(inboxPath(x.m.path, atomic.LoadUint64(x.entry(i, 1))))
			}
		}
		os.Remove(x.m.path)
	}
	return x.m.release()
}
