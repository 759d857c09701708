package nvswitch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

// Tests of the backend on hardware: virtual-memory buffers shared by file
// descriptor, and multicast groups with the multimem primitives. They run
// only with WEFT_NVLS=1, on a machine that may use NVLink SHARP; on shared
// hosts they skip (architecture.md §8), and WEFT_REQUIRE=nvswitch (not
// nvswitch-compile) turns the skip into a failure.

// hwSkip skips, or fails under WEFT_REQUIRE=nvswitch.
func hwSkip(t testing.TB, reason string) {
	t.Helper()
	if env.Required(Name) {
		t.Fatalf("WEFT_REQUIRE=%s but: %s", Name, reason)
	}
	t.Skip(reason)
}

// openHW opens GPUs 0..n-1 with this backend, or skips.
func openHW(t *testing.T, n int) []*Device {
	t.Helper()
	if !Enabled() {
		hwSkip(t, "WEFT_NVLS is not 1: tests of hal/nvswitch on hardware are compile-only (architecture.md §8)")
	}
	if a := (backend{}).Probe(); !a.Available {
		hwSkip(t, "nvswitch unavailable: "+a.Reason)
	}
	if c, _ := cuda.DeviceCount(); c < n {
		t.Skipf("needs %d GPUs, host has %d", n, c)
	}
	if os.Getenv("WEFT_CACHE_DIR") == "" {
		t.Setenv("WEFT_CACHE_DIR", t.TempDir())
	}
	var out []*Device
	for i := 0; i < n; i++ {
		d, err := Open(hal.Config{Ordinal: i, Rank: i, JobID: "nvswitch-hw"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		})
		out = append(out, d)
	}
	return out
}

func pattern(n int, mul, add byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)*mul + add
	}
	return b
}

// TestHardwareBuffers: Alloc gives zeroed virtual-memory buffers; Export
// and Import share them by descriptor within the process (a second
// mapping of the same memory, on the same GPU and on another).
func TestHardwareBuffers(t *testing.T) {
	d := openHW(t, 1)[0]
	const n = 3<<20 + 5
	b, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	if b.Size() != n {
		t.Errorf("Size() = %d, want %d", b.Size(), n)
	}
	zero := make([]byte, n)
	got := make([]byte, n)
	if err := d.Read(got, b, 0); err != nil || !bytes.Equal(got, zero) {
		t.Fatalf("new buffer not zeroed (%v)", err)
	}
	want := pattern(n, 7, 1)
	if err := d.Write(b, 0, want); err != nil {
		t.Fatal(err)
	}
	h, err := d.Export(b)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := d.Import(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Read(got, ib, 0); err != nil || !bytes.Equal(got, want) {
		t.Errorf("imported mapping reads other bytes (%v)", err)
	}
	want2 := pattern(n, 3, 2)
	if err := d.Write(ib, 0, want2); err != nil {
		t.Fatal(err)
	}
	if err := d.Read(got, b, 0); err != nil || !bytes.Equal(got, want2) {
		t.Errorf("write through the import not seen by the original (%v)", err)
	}
	if c, _ := cuda.DeviceCount(); c >= 2 {
		d1 := openHW(t, 2)[1]
		ib1, err := d1.Import(h)
		if err != nil {
			t.Fatalf("import on GPU 1: %v", err)
		}
		if err := d1.Read(got, ib1, 0); err != nil || !bytes.Equal(got, want2) {
			t.Errorf("GPU 1's mapping reads other bytes (%v)", err)
		}
		if err := ib1.Free(); err != nil {
			t.Error(err)
		}
	}
	host, err := d.AllocHost(4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Export(host); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("Export(host-pinned) = %v, want ErrInvalidArgument", err)
	}
	for _, x := range []hal.Buffer{ib, b, host} {
		if err := x.Free(); err != nil {
			t.Error(err)
		}
	}
	if err := b.Free(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("second Free = %v, want ErrInvalidUsage", err)
	}
}

// exporterEnv makes the test binary, re-executed, the exporting process of
// TestHardwareBuffersProcesses (its value: the GPU ordinal).
const exporterEnv = "WEFT_TEST_NVSWITCH_EXPORTER"

func TestMain(m *testing.M) {
	if v := os.Getenv(exporterEnv); v != "" {
		os.Exit(exporter(v))
	}
	os.Exit(m.Run())
}

// exporter allocates a buffer, fills it, prints its handle in hex, and on
// "check" from its standard input prints whether the importer's bytes
// arrived.
func exporter(ordinal string) int {
	ord, _ := strconv.Atoi(ordinal)
	d, err := Open(hal.Config{Ordinal: ord, Rank: 1, JobID: "nvswitch-hw"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer d.Close()
	const n = 1 << 20
	b, err := d.Alloc(n)
	if err == nil {
		err = d.Write(b, 0, pattern(n, 7, 1))
	}
	var h hal.Handle
	if err == nil {
		h, err = d.Export(b)
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer b.Free()
	fmt.Println(hex.EncodeToString(h))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "check" {
			continue
		}
		got := make([]byte, n)
		if err := d.Read(got, b, 0); err != nil {
			fmt.Println("error", err)
		} else if bytes.Equal(got, pattern(n, 3, 2)) {
			fmt.Println("ok")
		} else {
			fmt.Println("mismatch")
		}
	}
	return 0
}

// TestHardwareBuffersProcesses: a buffer exported by another process (the
// test binary re-executed, on the last GPU) is imported through
// pidfd_getfd, read, and written back.
func TestHardwareBuffersProcesses(t *testing.T) {
	d := openHW(t, 1)[0]
	c, _ := cuda.DeviceCount()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), exporterEnv+"="+strconv.Itoa(c-1))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	h, herr := hex.DecodeString(strings.TrimSpace(line))
	if err != nil || herr != nil {
		t.Fatalf("exporter said %q: %v %v", line, err, herr)
	}
	b, err := d.Import(h)
	if err != nil {
		t.Fatalf("import of pid %d's buffer: %v", cmd.Process.Pid, err)
	}
	defer b.Free()
	got := make([]byte, 1<<20)
	if err := d.Read(got, b, 0); err != nil || !bytes.Equal(got, pattern(1<<20, 7, 1)) {
		t.Errorf("imported buffer reads other bytes (%v)", err)
	}
	if err := d.Write(b, 0, pattern(1<<20, 3, 2)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "check")
	if line, _ := out.ReadString('\n'); strings.TrimSpace(line) != "ok" {
		t.Errorf("exporter after the importer's write: %q", line)
	}
}

const mcKernels = `#include "weft_switch_hal.h"
struct Params { const char* mc; weft_u32x4* out; weft_u64 nvec; };
extern "C" __global__ void mc_reduce(Params p) {
  for (weft_u64 i = blockIdx.x * (weft_u64)blockDim.x + threadIdx.x; i < p.nvec; i += (weft_u64)gridDim.x * blockDim.x)
    p.out[i] = weft::hal::multimem_ld_reduce16<weft::hal::mm::DT_F32, weft::hal::mm::OP_SUM>(p.mc + 16 * i);
}
extern "C" __global__ void mc_store(Params p) {
  for (weft_u64 i = blockIdx.x * (weft_u64)blockDim.x + threadIdx.x; i < p.nvec; i += (weft_u64)gridDim.x * blockDim.x)
    weft::hal::multimem_st16((void*)(p.mc + 16 * i), p.out[i]);
}
`

// TestHardwareMulticast: a group of every GPU (up to 4) in this process:
// created on GPU 0, joined by the others, each binding a buffer of
// (rank+1)·(k mod 251) in float32; GPU 0's load-reduce through the
// multicast address returns the exact sums, and its multimem store puts
// them into every member's buffer.
func TestHardwareMulticast(t *testing.T) {
	c, _ := cuda.DeviceCount()
	devs := openHW(t, max(2, min(c, 4)))
	n := len(devs)
	g0, err := devs[0].NewMulticast(1<<20, n)
	if err != nil {
		t.Fatal(err)
	}
	size := g0.Size()
	h, err := g0.Handle()
	if err != nil {
		t.Fatal(err)
	}
	groups := []hal.Multicast{g0}
	for _, d := range devs[1:] {
		g, err := d.ImportMulticast(h)
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g)
	}
	defer func() {
		for i := len(groups) - 1; i >= 0; i-- {
			if err := groups[i].Close(); err != nil {
				t.Error(err)
			}
		}
	}()
	nf := int(size / 4)
	bufs := make([]hal.Buffer, n)
	for r, d := range devs {
		if bufs[r], err = d.Alloc(size); err != nil {
			t.Fatal(err)
		}
		defer bufs[r].Free()
		v := make([]byte, size)
		for k := 0; k < nf; k++ {
			binary.LittleEndian.PutUint32(v[4*k:], math.Float32bits(float32((r+1)*(k%251))))
		}
		if err := d.Write(bufs[r], 0, v); err != nil {
			t.Fatal(err)
		}
	}
	for r, g := range groups {
		if err := g.Bind(bufs[r]); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, g := range groups {
		if g.Addr() == 0 {
			t.Fatalf("rank %d: multicast address 0 after Bind", r)
		}
	}
	d := devs[0]
	mod, err := d.Compile(hal.KernelSource{Name: "mc_test.cu", Source: mcKernels,
		Headers: map[string]string{DeviceHeaderName: d.DeviceHeader(), SwitchHeaderName: d.SwitchHeader()}})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	out, err := d.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	params := binary.LittleEndian.AppendUint64(nil, groups[0].Addr())
	params = binary.LittleEndian.AppendUint64(params, out.Addr())
	params = binary.LittleEndian.AppendUint64(params, uint64(size/16))
	run := func(name string) {
		f, err := mod.Function(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Launch(s, 64, 256, 0, params); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	sum := float32(n * (n + 1) / 2)
	check := func(what string, dev *Device, b hal.Buffer) {
		got := make([]byte, size)
		if err := dev.Read(got, b, 0); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < nf; k++ {
			if v, w := math.Float32frombits(binary.LittleEndian.Uint32(got[4*k:])), sum*float32(k%251); v != w {
				t.Fatalf("%s: element %d = %v, want %v", what, k, v, w)
			}
		}
	}
	run("mc_reduce")
	check("load-reduce on GPU 0", d, out)
	run("mc_store")
	for r := range devs {
		check(fmt.Sprintf("rank %d after GPU 0's multimem store", r), devs[r], bufs[r])
	}
	t.Logf("%d GPUs, group of %d bytes: load-reduce and store exact", n, size)
}
