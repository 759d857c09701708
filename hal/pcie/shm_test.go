package pcie

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
)

func useTempShm(t *testing.T) {
	t.Helper()
	old := shmDir
	shmDir = t.TempDir()
	t.Cleanup(func() { shmDir = old })
}

type countingPinner struct{ pins, unpins atomic.Int32 }

func (p *countingPinner) pin([]byte) error   { p.pins.Add(1); return nil }
func (p *countingPinner) unpin([]byte) error { p.unpins.Add(1); return nil }

// TestIndexAnnounceTake announces two inboxes in a receiver's index, takes
// them, moves data through one with the fake copiers, and frees entries
// for reuse; files are unlinked once both sides hold them.
func TestIndexAnnounceTake(t *testing.T) {
	useTempShm(t)
	path := indexPath(0xabc, "GPU-1234-56", 77)
	if want := filepath.Join(shmDir, "weft-pcie-0000000000000abc-1234-56-77"); path != want {
		t.Errorf("indexPath = %q, want %q", path, want)
	}
	rxIndex, err := openIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	txIndex, err := openIndex(path) // the sender's view, shared in this process
	if err != nil {
		t.Fatal(err)
	}
	g := geometry{slots: 2, slotBytes: 4096, descs: 8}
	pin := &countingPinner{}
	gen0 := rxIndex.generation()
	box, m, err := txIndex.announce(g, 1234, 5, pin)
	if err != nil {
		t.Fatal(err)
	}
	_, m2, err := txIndex.announce(g, 1234, 6, pin)
	if err != nil {
		t.Fatal(err)
	}
	if rxIndex.generation() != gen0+2 {
		t.Errorf("generation %d after two announcements, want %d", rxIndex.generation(), gen0+2)
	}
	got, errs := rxIndex.take(pin)
	if len(errs) != 0 || len(got) != 2 {
		t.Fatalf("take = %d inboxes, errors %v", len(got), errs)
	}
	if got[0].senderPID != 1234 || got[0].ordinal != 5 || got[1].ordinal != 6 || got[0].box.g != g {
		t.Errorf("announced %+v %+v", got[0], got[1])
	}
	if got[0].m != m || pin.pins.Load() != 2 {
		t.Errorf("in one process a taken inbox shares the sender's mapping (pins %d)", pin.pins.Load())
	}
	ents, _ := os.ReadDir(shmDir)
	if len(ents) != 1 {
		t.Errorf("%d files in the shm directory after take, want the index only", len(ents))
	}
	if again, _ := rxIndex.take(pin); len(again) != 0 {
		t.Errorf("a second take found %d inboxes", len(again))
	}

	// Move 10 KiB through the first inbox.
	src := newFakeMem(0x1000, 1<<16)
	dst := newFakeMem(0x100000, 1<<16)
	for i := 0; i < 10240; i++ {
		src.bytes()[i] = byte(i * 3)
	}
	s := newSender(box, &fakeStager{s: newFakeStream(1, sendFlights), mem: src}, "sender")
	rs := newFakeStream(2, g.slots)
	r := newReceiver(got[0].box, &fakeUnstager{s: rs, mem: dst}, "receiver", dst.contains)
	if err := s.put(0x100000, 0x1000, 10240); err != nil {
		t.Fatal(err)
	}
	if err := s.signal(0x100000+0x8000, 0, 0); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.drain(time.Now().Add(10 * time.Second)) }()
	deadline := time.Now().Add(10 * time.Second)
	for !r.finished() || rs.ran < len(rs.q) {
		rs.step()
		r.poll()
		if time.Now().After(deadline) {
			t.Fatal("receiver never finished")
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.bytes()[:10240], src.bytes()[:10240]) || atomic.LoadUint64(dst.word(0x108000)) != 1 {
		t.Error("data or signal did not arrive")
	}

	// Release: sender and receiver references; the last one unpins.
	for _, x := range []*shmMap{m, got[0].m, m2, got[1].m} {
		if err := x.release(); err != nil {
			t.Fatal(err)
		}
	}
	if pin.unpins.Load() != 2 {
		t.Errorf("unpins = %d, want 2", pin.unpins.Load())
	}
	rxIndex.free(got[0].entry)
	rxIndex.free(got[1].entry)
	if _, _, err := txIndex.announce(g, 1, 1, nil); err != nil {
		t.Fatalf("announce after entries were freed: %v", err)
	}
	if err := txIndex.close(false); err != nil {
		t.Fatal(err)
	}
	if err := rxIndex.close(true); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(shmDir); len(ents) != 0 {
		t.Errorf("files left after the receiver removed its index: %v", ents)
	}
}

func TestIndexFullAndForeign(t *testing.T) {
	useTempShm(t)
	x, err := openIndex(indexPath(1, "GPU-aa", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer x.close(true)
	g := geometry{slots: 1, slotBytes: 64, descs: 1}
	var maps []*shmMap
	for i := 0; i < indexEntries; i++ {
		_, m, err := x.announce(g, 1, 0, nil)
		if err != nil {
			t.Fatalf("announcement %d: %v", i, err)
		}
		maps = append(maps, m)
	}
	if _, _, err := x.announce(g, 1, 0, nil); !errors.Is(err, hal.ErrSystem) || !strings.Contains(err.Error(), "is full") {
		t.Errorf("announce into a full index = %v", err)
	}
	for _, m := range maps {
		m.release()
	}
	// A file that is not an index is refused.
	bad := filepath.Join(shmDir, "not-an-index")
	os.WriteFile(bad, bytes.Repeat([]byte{1}, indexSize), 0o600)
	if _, err := openIndex(bad); !errors.Is(err, hal.ErrRemote) {
		t.Errorf("openIndex(foreign file) = %v", err)
	}
	// An announced inbox whose file is gone is reported and its entry freed.
	y, _ := openIndex(indexPath(2, "GPU-bb", 2))
	defer y.close(true)
	_, m, err := y.announce(g, 1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.release()
	os.Remove(inboxPath(y.m.path, atomic.LoadUint64(y.entry(0, 1))))
	got, errs := y.take(nil)
	if len(got) != 0 || len(errs) != 1 || atomic.LoadUint64(y.entry(0, 0)) != entryFree {
		t.Errorf("take of a vanished inbox: %d inboxes, errors %v, entry state %d", len(got), errs, atomic.LoadUint64(y.entry(0, 0)))
	}
}

func TestMapShmErrors(t *testing.T) {
	useTempShm(t)
	p := filepath.Join(shmDir, "x")
	m, err := mapShm(p, 4096, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mapShm(p, 8192, false, nil); !errors.Is(err, hal.ErrRemote) {
		t.Errorf("mapping more than the mapped size = %v", err)
	}
	m.release()
	if _, err := mapShm(p, 4096, true, nil); !errors.Is(err, hal.ErrSystem) {
		t.Errorf("creating an existing file = %v, want ErrSystem", err)
	}
	if _, err := mapShm(p, 8192, false, nil); !errors.Is(err, hal.ErrRemote) {
		t.Errorf("opening a short file = %v, want ErrRemote", err)
	}
	if _, err := mapShm(filepath.Join(shmDir, "missing"), 8, false, nil); !errors.Is(err, hal.ErrSystem) {
		t.Errorf("opening a missing file = %v", err)
	}
}
