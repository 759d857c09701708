package pcie

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev/porttest"
	"github.com/weftccl/weft/internal/env"
)

// Flags of the child process of TestHostStagedAcrossProcesses (the test
// binary re-executed).
var (
	childWindow   = flag.String("pcie.window", "", "hex port handle of the parent's window (child mode)")
	childSems     = flag.String("pcie.sems", "", "hex port handle of the parent's semaphores")
	childPeer     = flag.String("pcie.peer", "", "JSON endpoint of the parent's device")
	childOrdinal  = flag.Int("pcie.ordinal", 0, "GPU the child opens")
	childBytes    = flag.Int("pcie.bytes", 0, "bytes the child puts")
	childJob      = flag.String("pcie.job", "", "job id of parent and child")
	childForceAll = flag.Bool("pcie.force", false, "child forces host staging")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *childWindow != "" {
		if err := runChild(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		fmt.Println("child ok")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// requireOrSkip skips the test, or fails it when WEFT_REQUIRE names pcie:
// a run on GPU hardware must not pass by skipping.
func requireOrSkip(t testing.TB, reason string) {
	t.Helper()
	if env.Required(Name) {
		t.Fatalf("WEFT_REQUIRE=%s but: %s", Name, reason)
	}
	t.Skip(reason)
}

// openTest opens GPU ordinal, skipping (with the probe's reason) where the
// backend is unavailable, and closes it at the end of the test. Tests that
// need more GPUs than the host has skip even under WEFT_REQUIRE.
func openTest(t *testing.T, ordinal int, job string) *Device {
	t.Helper()
	if a := (backend{}).Probe(); !a.Available {
		requireOrSkip(t, "pcie unavailable: "+a.Reason)
	}
	if n, _ := cuda.DeviceCount(); ordinal >= n {
		t.Skipf("needs %d GPUs, host has %d", ordinal+1, n)
	}
	if os.Getenv("WEFT_CACHE_DIR") == "" {
		t.Setenv("WEFT_CACHE_DIR", t.TempDir())
	}
	d, err := Open(hal.Config{Ordinal: ordinal, Rank: ordinal, JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func TestProbe(t *testing.T) {
	a := (backend{}).Probe()
	t.Logf("probe: %+v", a)
	if a.Available {
		if !strings.Contains(a.Reason, "staging") || !strings.Contains(a.Reason, "peer access") {
			t.Errorf("probe reason %q does not say how GPUs are linked", a.Reason)
		}
		return
	}
	ok := false
	for _, p := range []string{"no NVIDIA driver: ", "no CUDA devices", "NVRTC not found", "no usable NVIDIA driver"} {
		ok = ok || strings.HasPrefix(a.Reason, p)
	}
	if !ok {
		t.Errorf("unexpected probe reason %q", a.Reason)
	}
	if _, err := hal.Open(Name, hal.Config{}); !errors.Is(err, hal.ErrNotSupported) {
		t.Errorf("hal.Open(pcie) without GPU = %v, want ErrNotSupported", err)
	}
	requireOrSkip(t, "pcie unavailable: "+a.Reason)
}

func TestLink(t *testing.T) {
	d := openTest(t, 0, "")
	if d.Info().Backend != Name || d.Endpoint().Backend != Name || !strings.HasPrefix(d.String(), "pcie GPU 0") {
		t.Errorf("info %+v endpoint %+v %s", d.Info(), d.Endpoint(), d)
	}
	if l := d.Link(d.Endpoint()); l.Caps != hal.CapMemoryMapped|hal.CapPortMapped {
		t.Errorf("Link(self) = %+v", l)
	}
	if n, _ := cuda.DeviceCount(); n >= 2 {
		d1 := openTest(t, 1, "")
		dev0, _ := d.CUDA()
		dev1, _ := d1.CUDA()
		can, _ := cuda.CanAccessPeer(dev0, dev1)
		l := d.Link(d1.Endpoint())
		want := hal.CapPortMapped
		if can {
			want |= hal.CapMemoryMapped
		}
		if l.Caps != want {
			t.Errorf("Link(GPU 1) = %+v, cuDeviceCanAccessPeer = %v", l, can)
		}
		t.Logf("GPU 0 to GPU 1: %+v", l)
	}
}

// TestPortSelf runs the port-mapped checks with copy engines of GPU 0 to
// itself.
func TestPortSelf(t *testing.T) {
	d := openTest(t, 0, "")
	porttest.Run(t, d, d)
}

// TestPortPeerAccess runs them between GPUs 0 and 1 with peer access
// (copy engines), both ways.
func TestPortPeerAccess(t *testing.T) {
	d0 := openTest(t, 0, "")
	d1 := openTest(t, 1, "")
	if l := d0.Link(d1.Endpoint()); l.Caps&hal.CapMemoryMapped == 0 {
		t.Skipf("no peer access between GPUs 0 and 1: %s", l.Reason)
	}
	t.Run("0to1", func(t *testing.T) { porttest.Run(t, d0, d1) })
	t.Run("1to0", func(t *testing.T) { porttest.Run(t, d1, d0) })
}

// TestPortHostStaged runs them between GPUs 0 and 1 of this process with
// WEFT_PCIE_P2P=0: every transfer goes through an inbox in /dev/shm.
func TestPortHostStaged(t *testing.T) {
	t.Setenv("WEFT_PCIE_P2P", "0")
	d0 := openTest(t, 0, "staged")
	d1 := openTest(t, 1, "staged")
	if l := d0.Link(d1.Endpoint()); l.Caps != hal.CapPortMapped || !strings.Contains(l.Reason, "WEFT_PCIE_P2P=0") {
		t.Fatalf("Link with WEFT_PCIE_P2P=0 = %+v, want port-mapped, host-staged", l)
	}
	t.Run("0to1", func(t *testing.T) { porttest.Run(t, d0, d1) })
	t.Run("1to0", func(t *testing.T) { porttest.Run(t, d1, d0) })
	checkShmClean(t, d0, d1)
}

// TestPortHostStagedOneGPU forces host staging on GPU 0 to itself, so
// that the inbox path runs on any GPU host.
func TestPortHostStagedOneGPU(t *testing.T) {
	forceStaged = true
	defer func() { forceStaged = false }()
	d := openTest(t, 0, "staged-self")
	if l := d.Link(d.Endpoint()); l.Caps != hal.CapPortMapped {
		t.Fatalf("forced Link(self) = %+v", l)
	}
	porttest.Run(t, d, d)
	checkShmClean(t, d)
}

// checkShmClean checks that closed engines left only the receivers'
// index files in /dev/shm, and that no file of this process carries
// anything of the job in its name.
func checkShmClean(t *testing.T, devs ...*Device) {
	t.Helper()
	for _, d := range devs {
		ents, _ := os.ReadDir(shmDir)
		inboxes := filePrefix + d.tag + "-in"
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), inboxes) {
				t.Errorf("inbox file %s left after its engine closed", e.Name())
			}
			job := d.Config().JobID
			if strings.HasPrefix(e.Name(), filePrefix+d.tag) && (strings.Contains(e.Name(), fmt.Sprintf("%016x", d.job)) || job != "" && strings.Contains(e.Name(), job)) {
				t.Errorf("file %s names the job (id %q, hash %016x)", e.Name(), job, d.job)
			}
		}
	}
}

// TestHostStagedAcrossProcesses exports a window and semaphores here and
// lets a child process (this test binary re-executed, on GPU 1 where
// there is one) put into them through a host-staged engine and signal:
// the production shape, one process per GPU sharing /dev/shm inboxes.
func TestHostStagedAcrossProcesses(t *testing.T) {
	t.Setenv("WEFT_PCIE_P2P", "0")
	job := fmt.Sprintf("xproc-%d", os.Getpid())
	d := openTest(t, 0, job)
	const n = 13<<20 + 40
	win, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer win.Free()
	sems, err := d.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	defer sems.Free()
	hw, err := d.ExportPort(win)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := d.ExportPort(sems)
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := json.Marshal(d.Endpoint())
	childGPU := 0
	if cnt, _ := cuda.DeviceCount(); cnt >= 2 {
		childGPU = 1
	}
	args := []string{"-test.run=^$", "-pcie.window=" + hex.EncodeToString(hw), "-pcie.sems=" + hex.EncodeToString(hs),
		"-pcie.peer=" + string(ep), fmt.Sprintf("-pcie.ordinal=%d", childGPU), fmt.Sprintf("-pcie.bytes=%d", n), "-pcie.job=" + job}
	if childGPU == 0 {
		args = append(args, "-pcie.force") // the same GPU is never host-staged unless forced
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WEFT_PCIE_P2P=0")
	out, err := cmd.CombinedOutput()
	t.Logf("child on GPU %d: %s", childGPU, strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
	porttest.WaitWord(t, d, sems, 0, 1)
	got := make([]byte, n)
	if err := d.Read(got, win, 0); err != nil {
		t.Fatal(err)
	}
	if want := porttest.Pattern(n, 99); string(got) != string(want) {
		t.Error("data put by the child differs")
	}
	w := make([]byte, 8)
	d.Read(w, sems, 8)
	if w[0] != 7 {
		t.Errorf("count word %v, want 7", w)
	}
}

// runChild is the child side of TestHostStagedAcrossProcesses.
func runChild() error {
	forceStaged = *childForceAll
	hw, err := hex.DecodeString(*childWindow)
	if err != nil {
		return err
	}
	hs, err := hex.DecodeString(*childSems)
	if err != nil {
		return err
	}
	var peer hal.Endpoint
	if err := json.Unmarshal([]byte(*childPeer), &peer); err != nil {
		return err
	}
	d, err := Open(hal.Config{Ordinal: *childOrdinal, Rank: 1, JobID: *childJob})
	if err != nil {
		return err
	}
	defer d.Close()
	if l := d.Link(peer); l.Caps != hal.CapPortMapped {
		return fmt.Errorf("link to the parent is %+v, want host-staged", l)
	}
	win, err := d.ImportPort(hw)
	if err != nil {
		return err
	}
	defer win.Free()
	sems, err := d.ImportPort(hs)
	if err != nil {
		return err
	}
	defer sems.Free()
	if win.Host() != nil || win.Size() != int64(*childBytes) {
		return fmt.Errorf("imported window %#x+%d", win.Addr(), win.Size())
	}
	src, err := d.Alloc(int64(*childBytes))
	if err != nil {
		return err
	}
	defer src.Free()
	if err := d.Write(src, 0, porttest.Pattern(*childBytes, 99)); err != nil {
		return err
	}
	e, err := d.NewEngine(peer)
	if err != nil {
		return err
	}
	if err := e.Put(win.Addr(), src.Addr(), int64(*childBytes)); err != nil {
		return err
	}
	if err := e.Signal(sems.Addr(), sems.Addr()+8, 7); err != nil {
		return err
	}
	tk, err := e.Mark()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, err := e.Completed()
		if err != nil {
			return err
		}
		if done >= tk {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ticket %d not complete (completed %d)", tk, done)
		}
		time.Sleep(20 * time.Microsecond)
	}
	// Close publishes what is left and waits for the parent's receiver.
	if err := e.Close(); err != nil {
		return err
	}
	fmt.Printf("put %d bytes from %s through a host-staged engine\n", *childBytes, d)
	return nil
}
