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
	"github.com/weftccl/weft/internal/shm"
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
		if free, where, err := shm.Room(shmDir); err == nil && uint64(size) > free {
			return nil, fmt.Errorf("pcie: create %s of %s: %s has %s free: %w", path, shm.Bytes(uint64(size)), where, shm.Bytes(free), hal.ErrSystem)
		}
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pcie: open %s: %v: %w", path, err, hal.ErrSystem)
	}
	defer f.Close()
	if create {
		if err := reserve(f, size); err != nil {
			os.Remove(path)
			free, where, _ := shm.Room(shmDir)
			return nil, fmt.Errorf("pcie: size %s to %s: %v (%s has %s free): %w", path, shm.Bytes(uint64(size)), err, where, shm.Bytes(free), hal.ErrSystem)
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

// unlinkIfLast removes the file when this is the process's only reference
// to the mapping.
func (m *shmMap) unlinkIfLast() {
	shmMaps.Lock()
	defer shmMaps.Unlock()
	if m.refs == 1 {
		os.Remove(m.path)
	}
}

// reserve sizes a new file and allocates its pages now, so that memory
// that is not there fails here rather than as a SIGBUS at a later store.
// File systems without fallocate get a sparse file.
func reserve(f *os.File, size int64) error {
	switch err := syscall.Fallocate(int(f.Fd()), 0, 0, size); err {
	case nil:
		return nil
	case syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EINVAL:
		return f.Truncate(size)
	default:
		return err
	}
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
// closed and drained, frees. Names carry nothing of the job (package
// internal/shm): an index is "weft-pcie-TAG-UUID" with the receiving
// process's tag and its GPU's UUID, an inbox "weft-pcie-TAG-inNONCE" with
// its sender's tag and a random nonce, so that the files of a process
// killed by a signal are reclaimed by the next weft process of the user.
// Two jobs of one process on one GPU share the index; the job's hash in
// each entry keeps each receiver to its own job's inboxes.
//
//	off        field (64-bit words)
//	0          magic "WEFTPCI2"
//	8          generation: incremented after each announcement
//	64 + 64 i  entry i: state, nonce, sender pid, sender ordinal, job hash,
//	           sender start time, sender pid namespace (the sender's tag)
const (
	indexMagic   = 0x3249435054464557 // "WEFTPCI2"
	indexEntries = 256
	indexSize    = 64 + indexEntries*64

	entryFree    = 0
	entryClaimed = 1 // a sender is creating the inbox
	entryReady   = 2 // the inbox file exists and is initialised
	entryTaken   = 3 // the receiver has opened it

	fieldState   = 0
	fieldNonce   = 1
	fieldPID     = 2
	fieldOrdinal = 3
	fieldJob     = 4
	fieldStart   = 5
	fieldNS      = 6
)

// filePrefix starts the name of every file of this backend.
const filePrefix = "weft-pcie-"

// indexPath names the index of GPU uuid in the process whose tag is tag.
func indexPath(tag, uuid string) string {
	return filepath.Join(shmDir, filePrefix+tag+"-"+strings.TrimPrefix(uuid, "GPU-"))
}

// inboxPath names an inbox that the process whose tag is senderTag
// created.
func inboxPath(senderTag string, nonce uint64) string {
	return filepath.Join(shmDir, fmt.Sprintf("%s%s-in%016x", filePrefix, senderTag, nonce))
}

// peerIndexPath names the index of GPU uuid of process pid of this host:
// its tag is read from /proc, so the process must be visible in this pid
// namespace. Errors wrap hal.ErrRemote (no such process).
func peerIndexPath(uuid string, pid int) (string, error) {
	tag, err := shm.Tag(pid)
	if err != nil {
		return "", fmt.Errorf("pcie: inbox index of pid %d: the process is gone or not visible in this pid namespace (%v): %w", pid, err, hal.ErrRemote)
	}
	return indexPath(tag, uuid), nil
}

// sender identifies the process announcing an inbox.
type senderID struct {
	tag     string
	ordinal int
	job     uint64
}

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

// entryTag is the tag of the sender of entry i.
func (x *index) entryTag(i int) string {
	return fmt.Sprintf("%d-%d-%d", atomic.LoadUint64(x.entry(i, fieldPID)), atomic.LoadUint64(x.entry(i, fieldStart)), atomic.LoadUint64(x.entry(i, fieldNS)))
}

func (x *index) generation() uint64 { return atomic.LoadUint64(x.word(8)) }

// announce creates an inbox for a sender: it claims a free entry, creates
// and maps the inbox file (pinned with p), initialises it, and marks the
// entry ready. Errors wrap hal.ErrSystem (index full, file errors, no
// room) or hal.ErrInvalidArgument (a malformed tag).
func (x *index) announce(g geometry, from senderID, p pinner) (*inbox, *shmMap, error) {
	pid, start, ns, ok := shm.ParseTag(from.tag)
	if !ok {
		return nil, nil, fmt.Errorf("pcie: announce an inbox for sender tag %q: not a tag: %w", from.tag, hal.ErrInvalidArgument)
	}
	for i := 0; i < indexEntries; i++ {
		if !atomic.CompareAndSwapUint64(x.entry(i, fieldState), entryFree, entryClaimed) {
			continue
		}
		var nb [8]byte
		rand.Read(nb[:])
		nonce := binary.LittleEndian.Uint64(nb[:])
		path := inboxPath(from.tag, nonce)
		m, err := mapShm(path, g.size(), true, p)
		if err != nil {
			atomic.StoreUint64(x.entry(i, fieldState), entryFree)
			return nil, nil, err
		}
		box, err := initInbox(m.mem, g, pid)
		if err != nil {
			m.release()
			os.Remove(path)
			atomic.StoreUint64(x.entry(i, fieldState), entryFree)
			return nil, nil, err
		}
		atomic.StoreUint64(x.entry(i, fieldNonce), nonce)
		atomic.StoreUint64(x.entry(i, fieldPID), uint64(pid))
		atomic.StoreUint64(x.entry(i, fieldOrdinal), uint64(from.ordinal))
		atomic.StoreUint64(x.entry(i, fieldJob), from.job)
		atomic.StoreUint64(x.entry(i, fieldStart), start)
		atomic.StoreUint64(x.entry(i, fieldNS), ns)
		atomic.StoreUint64(x.entry(i, fieldState), entryReady)
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

// take opens the inboxes of job announced since the last call: claims each
// entry, maps its inbox (pinned with p), validates its header, unlinks its
// file (both sides hold it mapped) and marks the entry taken. Entries of
// other jobs (another device of this process on the same GPU) are left to
// their receiver. An inbox that fails to open is reported in errs and its
// entry freed.
func (x *index) take(job uint64, p pinner) (got []announced, errs []error) {
	for i := 0; i < indexEntries; i++ {
		if atomic.LoadUint64(x.entry(i, fieldState)) != entryReady || atomic.LoadUint64(x.entry(i, fieldJob)) != job {
			continue
		}
		if !atomic.CompareAndSwapUint64(x.entry(i, fieldState), entryReady, entryTaken) {
			continue // another receiver of the job took it
		}
		path := inboxPath(x.entryTag(i), atomic.LoadUint64(x.entry(i, fieldNonce)))
		a := announced{entry: i, senderPID: int(atomic.LoadUint64(x.entry(i, fieldPID))), ordinal: int(atomic.LoadUint64(x.entry(i, fieldOrdinal)))}
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
			atomic.StoreUint64(x.entry(i, fieldState), entryFree)
			continue
		}
		a.m = m
		got = append(got, a)
	}
	return got, errs
}

// free returns a taken entry to the senders.
func (x *index) free(entry int) { atomic.StoreUint64(x.entry(entry, fieldState), entryFree) }

// close unmaps the index. With remove it first unlinks the inbox files of
// job's entries announced and never taken (freeing the entries), and the
// index file itself unless another device of this process still maps it
// (a device of another job on the same GPU).
func (x *index) close(remove bool, job uint64) error {
	if remove {
		for i := 0; i < indexEntries; i++ {
			if atomic.LoadUint64(x.entry(i, fieldJob)) == job && atomic.CompareAndSwapUint64(x.entry(i, fieldState), entryReady, entryClaimed) {
				os.Remove(inboxPath(x.entryTag(i), atomic.LoadUint64(x.entry(i, fieldNonce))))
				atomic.StoreUint64(x.entry(i, fieldState), entryFree)
			}
		}
		x.m.unlinkIfLast()
	}
	return x.m.release()
}
