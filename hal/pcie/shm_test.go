package pcie

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/shm"
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
	path := indexPath("77-1000-4026531836", "GPU-1234-56")
	if want := filepath.Join(shmDir, "weft-pcie-77-1000-4026531836-1234-56"); path != want {
		t.Errorf("indexPath = %q, want %q", path, want)
	}
	const job = 0xabc
	from := senderID{tag: "1234-99-4026531836", ordinal: 5, job: job}
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
	box, m, err := txIndex.announce(g, from, pin)
	if err != nil {
		t.Fatal(err)
	}
	from.ordinal = 6
	_, m2, err := txIndex.announce(g, from, pin)
	if err != nil {
		t.Fatal(err)
	}
	if rxIndex.generation() != gen0+2 {
		t.Errorf("generation %d after two announcements, want %d", rxIndex.generation(), gen0+2)
	}
	for i := 0; i < 2; i++ {
		name := filepath.Base(inboxPath(from.tag, atomic.LoadUint64(rxIndex.entry(i, fieldNonce))))
		if !strings.HasPrefix(name, "weft-pcie-1234-99-4026531836-in") {
			t.Errorf("inbox %d is named %q, want the sender's tag and a nonce", i, name)
		}
		if _, err := os.Stat(filepath.Join(shmDir, name)); err != nil {
			t.Errorf("inbox %d: %v", i, err)
		}
	}
	if got, errs := rxIndex.take(job+1, pin); len(got) != 0 || len(errs) != 0 {
		t.Errorf("a receiver of another job took %d inboxes (errors %v)", len(got), errs)
	}
	got, errs := rxIndex.take(job, pin)
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
	if again, _ := rxIndex.take(job, pin); len(again) != 0 {
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
	if _, _, err := txIndex.announce(g, from, nil); err != nil {
		t.Fatalf("announce after entries were freed: %v", err)
	}
	if err := txIndex.close(false, job); err != nil {
		t.Fatal(err)
	}
	if err := rxIndex.close(true, job); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(shmDir); len(ents) != 0 {
		t.Errorf("files left after the receiver removed its index: %v", ents)
	}
}

func TestIndexFullAndForeign(t *testing.T) {
	useTempShm(t)
	x, err := openIndex(indexPath("1-1-1", "GPU-aa"))
	if err != nil {
		t.Fatal(err)
	}
	defer x.close(true, 1)
	g := geometry{slots: 1, slotBytes: 64, descs: 1}
	from := senderID{tag: "1-1-1", job: 1}
	var maps []*shmMap
	for i := 0; i < indexEntries; i++ {
		_, m, err := x.announce(g, from, nil)
		if err != nil {
			t.Fatalf("announcement %d: %v", i, err)
		}
		maps = append(maps, m)
	}
	if _, _, err := x.announce(g, from, nil); !errors.Is(err, hal.ErrSystem) || !strings.Contains(err.Error(), "is full") {
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
	y, _ := openIndex(indexPath("2-2-2", "GPU-bb"))
	defer y.close(true, 1)
	_, m, err := y.announce(g, from, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.release()
	os.Remove(inboxPath(from.tag, atomic.LoadUint64(y.entry(0, fieldNonce))))
	got, errs := y.take(1, nil)
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

// TestTwoJobsShareAnIndex opens the index of one GPU of one process for two
// receivers of different jobs, as two communicators of one process on one
// GPU do: each takes only its own job's inboxes, and the first to close
// removes its job's untaken inbox but leaves the index file to the other.
func TestTwoJobsShareAnIndex(t *testing.T) {
	useTempShm(t)
	path := indexPath("10-20-30", "GPU-cc")
	a, err := openIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := openIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	g := geometry{slots: 1, slotBytes: 64, descs: 1}
	var maps []*shmMap
	for _, job := range []uint64{1, 2, 1} {
		_, m, err := a.announce(g, senderID{tag: "40-50-30", ordinal: int(job), job: job}, nil)
		if err != nil {
			t.Fatal(err)
		}
		maps = append(maps, m)
	}
	got2, errs := b.take(2, nil)
	if len(got2) != 1 || len(errs) != 0 || got2[0].ordinal != 2 {
		t.Fatalf("job 2 took %d inboxes (%+v), errors %v; want its one", len(got2), got2, errs)
	}
	if err := b.close(true, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("job 2's receiver removed the index job 1 still uses: %v", err)
	}
	got1, errs := a.take(1, nil)
	if len(got1) != 2 || len(errs) != 0 || got1[0].ordinal != 1 || got1[1].ordinal != 1 {
		t.Errorf("job 1 took %d inboxes, errors %v; want its two", len(got1), errs)
	}
	for _, m := range maps {
		m.release()
	}
	for _, x := range append(got1, got2...) {
		x.m.release()
	}
	if err := a.close(true, 1); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(shmDir); len(ents) != 0 {
		t.Errorf("files left after both receivers closed: %v", ents)
	}
}

// TestReclaimDeadCreators leaves files of a process that is gone (this
// pid with another start time: a reused pid), of this live process, and of
// the naming scheme before tags with a pid that exists and one that does
// not: reclaim removes exactly the dead creators' files.
func TestReclaimDeadCreators(t *testing.T) {
	useTempShm(t)
	self, err := shm.Tag(0)
	if err != nil {
		t.Fatal(err)
	}
	pid, start, ns, ok := shm.ParseTag(self)
	if !ok || pid != os.Getpid() {
		t.Fatalf("ParseTag(%q) = %d %d %d %v", self, pid, start, ns, ok)
	}
	dead := fmt.Sprintf("%d-%d-%d", pid, start+1, ns)
	gone := deadPID(t)
	uuid := "GPU-0a1b2c3d-0000-1111-2222-333344445555"
	files := map[string]bool{ // name -> reclaimed
		filepath.Base(indexPath(dead, uuid)): true,
		filepath.Base(inboxPath(dead, 7)):    true,
		filepath.Base(indexPath(self, uuid)): false,
		filepath.Base(inboxPath(self, 7)):    false,
		fmt.Sprintf("weft-pcie-00000000deadbeef-0a1b2c3d-0000-1111-2222-333344445555-%d", gone):                  true,
		fmt.Sprintf("weft-pcie-00000000deadbeef-0a1b2c3d-0000-1111-2222-333344445555-%d-00000000000000ff", gone): true,
		fmt.Sprintf("weft-pcie-00000000deadbeef-0a1b2c3d-0000-1111-2222-333344445555-%d", os.Getpid()):           false,
		fmt.Sprintf("weft-job-x-%d-0-3", gone):                                                                   true,
		fmt.Sprintf("weft-job-x-%d-0-mc1", gone):                                                                 true,
		fmt.Sprintf("weft-job-x-%d-0-3", os.Getpid()):                                                            false,
		"weft-pcie-unrelated": false,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(shmDir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reclaim()
	shm.Reclaim(shmDir, "weft-") // hal/host's part, for the old host names' neighbours
	for name, gone := range files {
		_, err := os.Stat(filepath.Join(shmDir, name))
		if gone && err == nil {
			t.Errorf("%s (creator gone) was not reclaimed", name)
		}
		if !gone && err != nil {
			t.Errorf("%s (creator alive, or not a weft name) was removed: %v", name, err)
		}
	}
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	pid := cmd.Process.Pid
	if _, err := shm.StartTime(pid); err == nil {
		t.Skipf("pid %d already reused", pid)
	}
	return pid
}
