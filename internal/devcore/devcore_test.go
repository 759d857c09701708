package devcore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
)

func TestPoll(t *testing.T) {
	n := 0
	err := Poll(time.Now().Add(time.Second), func() (bool, error) { n++; return n == 3, nil }, func(error, time.Duration) error { return errors.New("failed") })
	if err != nil || n != 3 {
		t.Errorf("Poll until done = %v after %d queries", err, n)
	}
	err = Poll(time.Now().Add(2*time.Millisecond), func() (bool, error) { return false, nil }, func(err error, waited time.Duration) error {
		if err != nil || waited < 2*time.Millisecond {
			t.Errorf("fail(%v, %v) at the deadline", err, waited)
		}
		return hal.ErrTimeout
	})
	if err != hal.ErrTimeout {
		t.Errorf("Poll past its deadline = %v", err)
	}
	boom := errors.New("boom")
	if err := Poll(time.Time{}, func() (bool, error) { return false, boom }, func(err error, _ time.Duration) error { return err }); err != boom {
		t.Errorf("Poll with a failing query = %v", err)
	}
}

func TestFailure(t *testing.T) {
	boom := errors.New("boom")
	if err := Failure("synchronize stream of GPU 0")(boom, time.Second); !errors.Is(err, boom) || errors.Is(err, hal.ErrTimeout) ||
		err.Error() != "synchronize stream of GPU 0: boom" {
		t.Errorf("Failure of a query = %v", err)
	}
	err := Failure("close engine")(nil, 1500*time.Microsecond)
	if !errors.Is(err, hal.ErrTimeout) || err.Error() != "close engine: not done after 2ms: "+hal.ErrTimeout.Error() {
		t.Errorf("Failure at the deadline = %v", err)
	}
}

func TestReadHostID(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "sys/kernel/random"), 0o755)
	os.MkdirAll(filepath.Join(root, "self/ns"), 0o755)
	os.WriteFile(filepath.Join(root, "sys/kernel/random/boot_id"), []byte("6a1b0d3c-0000-4000-8000-000000000001\n"), 0o644)
	os.Symlink("ipc:[4026531839]", filepath.Join(root, "self/ns/ipc"))
	got, err := ReadHostID(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := "6a1b0d3c-0000-4000-8000-000000000001/ipc:[4026531839]"; got != want {
		t.Errorf("ReadHostID = %q, want %q", got, want)
	}
	if _, err := ReadHostID(t.TempDir()); err == nil {
		t.Error("ReadHostID of an empty tree succeeded")
	}
	// The real one works on Linux and is stable.
	if id := HostID(); id == "" || id != HostID() {
		t.Errorf("HostID() = %q", id)
	}
}

func TestHashID(t *testing.T) {
	if got := HashID("job"); got != HashID("job") || got == HashID("jod") {
		t.Errorf("HashID(job) = %#x: not stable, or equal to HashID(jod)", got)
	}
	// SHA-256("") = e3b0c442 98fc1c14 …, whose first 8 bytes read
	// little-endian are 0x141cfc9842c4b0e3.
	if got, want := HashID(""), uint64(0x141cfc9842c4b0e3); got != want {
		t.Errorf("HashID(\"\") = %#x, want %#x", got, want)
	}
}

// fakeDev is a device of a fake runtime for IPC: handles are opened at
// base+1 MiB×device, allocations are 2 MiB.
type fakeDev struct {
	refuse  bool // refuses every open (a second open in the process)
	opened  map[uint64]int
	closed  []uint64
	rangeOK bool
}

type ptr uint64

func fakeIPC(devs map[int]*fakeDev) *IPC[int, [4]byte, ptr] {
	return &IPC[int, [4]byte, ptr]{
		OpenHandle: func(d int, h [4]byte) (ptr, error) {
			if devs[d].refuse {
				return 0, errors.New("already mapped")
			}
			base := ptr(uint64(h[0])<<32 + uint64(d)<<20)
			devs[d].opened[uint64(base)]++
			return base, nil
		},
		Range: func(d int, p ptr) (ptr, int64, error) {
			if !devs[d].rangeOK {
				return 0, 0, errors.New("no range")
			}
			return p, 2 << 20, nil
		},
		CloseHandle: func(d int, p ptr) error {
			devs[d].closed = append(devs[d].closed, uint64(p))
			return nil
		},
	}
}

func TestIPC(t *testing.T) {
	devs := map[int]*fakeDev{0: {opened: map[uint64]int{}, rangeOK: true}, 1: {refuse: true, opened: map[uint64]int{}}, 2: {opened: map[uint64]int{}}}
	tab := fakeIPC(devs)
	h := [4]byte{7}
	a, err := tab.Open(0, h)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tab.Open(0, h) // the same device again: the same mapping
	if err != nil || b != a || a.Size != 2<<20 || a.Base != 7<<32 {
		t.Fatalf("second open = %+v, %v; want the first mapping %+v", b, err, a)
	}
	c, err := tab.Open(1, h) // refused on device 1: device 0's mapping is shared
	if err != nil || c != a {
		t.Fatalf("open refused by the runtime = %+v, %v; want the mapping of device 0", c, err)
	}
	if _, err := tab.Open(1, [4]byte{8}); err == nil {
		t.Error("open of a handle nobody has mapped, refused by the runtime, succeeded")
	}
	if _, err := tab.Open(2, h); err == nil || len(devs[2].closed) != 1 {
		t.Errorf("open whose range fails = %v, closed %v; want an error and the handle closed", err, devs[2].closed)
	}
	for i, m := range []*Mapping[int, [4]byte, ptr]{a, b} {
		if err := m.Release(); err != nil || len(devs[0].closed) != 0 {
			t.Fatalf("release %d of 3 closed the mapping (%v, %v)", i+1, err, devs[0].closed)
		}
	}
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{7 << 32}, devs[0].closed); diff != "" {
		t.Errorf("handles closed after the last release (-want +got):\n%s", diff)
	}
	if d, err := tab.Open(0, h); err != nil || d == a || devs[0].opened[7<<32] != 2 {
		t.Errorf("open after the last release = %v, %v: want a fresh mapping", d, err)
	}
}
