// Package host is weft's CPU reference backend: it implements the whole HAL
// contract in software, so that every channel and algorithm runs, and is
// tested, on a machine without accelerators.
//
// Device memory is shared memory: every buffer is a file in /dev/shm (or
// the temporary directory when /dev/shm is absent) mapped MAP_SHARED, so
// separate processes of a job really share it, and an exported handle is the
// file's name. A multicast group (the switch-mapped capability) is a control
// file in the same place, and the plan interpreter performs its load-reduce
// and store over every member's copy (multicast.go). Streams are goroutines that run queued work in order; graph
// capture records launches for replay. Plans are interpreted in Go: each
// thread block of a plan is a goroutine, semaphores are 64-bit atomics in
// shared memory, and LL packets are written data first, flags last, with
// the same layouts a GPU uses (package plan), so a plan that is right here
// is right on a GPU up to the memory model of the hardware.
//
// The backend is always available. Import it for its side effect:
//
//	import _ "github.com/weftccl/weft/hal/host"
package host

import (
	"crypto/rand"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/shm"
)

// Name is the backend's registry name.
const Name = "host"

func init() { hal.Register(backend{}) }

type backend struct{}

func (backend) Name() string { return Name }

func (backend) Probe() hal.Availability {
	return hal.Availability{Available: true, Reason: fmt.Sprintf("CPU reference backend, shared memory in %s", shmDir())}
}

func (backend) Open(cfg hal.Config) (hal.Device, error) {
	if cfg.Ordinal < 0 {
		return nil, fmt.Errorf("host: device ordinal %d: %w", cfg.Ordinal, hal.ErrInvalidArgument)
	}
	job := cfg.JobID
	if job == "" {
		job = fmt.Sprintf("p%d", os.Getpid())
	}
	if strings.ContainsAny(job, "/\x00") {
		return nil, fmt.Errorf("host: job id %q contains '/' or NUL: %w", job, hal.ErrInvalidArgument)
	}
	reclaim()
	tag, err := shm.Tag(0)
	if err != nil {
		return nil, fmt.Errorf("host: open device %d: %v: %w", cfg.Ordinal, err, hal.ErrSystem)
	}
	var id [4]byte
	rand.Read(id[:])
	// File names: "weft-" PID-START-NS (the creator, for reclaim), a
	// random id of this device, a sequence number; nothing of the job.
	d := &Device{cfg: cfg, job: job, host: hostID(), tag: fmt.Sprintf("%s-%x", tag, id)}
	d.node = hal.NodeOf(d.host, env.String("WEFT_NODE_ID"))
	return d, nil
}

// Device is a host "device": an address space of shared-memory mappings.
type Device struct {
	cfg  hal.Config
	job  string
	tag  string // PID-START-NS-DEVICEID: the start of this device's file names
	host string
	node string // WEFT_NODE_ID, else host

	mu      sync.Mutex
	regions []*region    // sorted by start address
	mcs     []*multicast // multicast groups joined
	seq     int
	closed  bool

	waiting opsWaiting // queued stream operations with waits (streamops.go)
}

var (
	_ hal.Device         = (*Device)(nil)
	_ hal.MemoryMapped   = (*Device)(nil)
	_ hal.Executor       = (*Device)(nil)
	_ hal.GraphCapturer  = (*Device)(nil)
	_ hal.CaptureQuerier = (*Device)(nil)
	_ hal.SwitchMapped   = (*Device)(nil)
	_ hal.RangeExporter  = (*Device)(nil)
	_ hal.LL128Carrier   = (*Device)(nil)
)

// LL128 reports true for every peer: this backend stores an LL128 line's
// data before its flag (an atomic store) and loads the flag first, so its
// lines are sound in any memory (the reference for hal/nvlink's).
func (d *Device) LL128(hal.Endpoint) bool { return true }

// Info describes the device. Multiprocessors is GOMAXPROCS: the number of
// thread blocks that can run at once.
func (d *Device) Info() hal.DeviceInfo {
	return hal.DeviceInfo{
		Backend:         Name,
		Ordinal:         d.cfg.Ordinal,
		Name:            "host",
		UUID:            fmt.Sprintf("host-%s-%d-%d", d.host, os.Getpid(), d.cfg.Ordinal),
		MemoryBytes:     0,
		Multiprocessors: runtime.GOMAXPROCS(0),
		Runtime:         runtime.Version(),
	}
}

// Endpoint identifies this device to peers.
func (d *Device) Endpoint() hal.Endpoint {
	h, _ := os.Hostname()
	return hal.Endpoint{Backend: Name, Hostname: h, HostID: d.host, Ordinal: d.cfg.Ordinal, PID: os.Getpid(), Node: d.node}
}

// Link offers memory-mapped, port-mapped and switch-mapped access to every
// peer of the same host, this device's own endpoint included (its engine
// copies within the device): every process of the host shares its shared
// memory, where buffers and multicast groups live.
func (d *Device) Link(peer hal.Endpoint) hal.Link {
	switch {
	case peer.Backend != Name:
		return hal.Link{Reason: fmt.Sprintf("peer uses backend %q", peer.Backend)}
	case peer.HostID != d.host:
		return hal.Link{Reason: fmt.Sprintf("peer is on another host (%s)", peer.Hostname)}
	}
	if why := d.Endpoint().OtherNode(peer); why != "" {
		return hal.Link{Reason: why}
	}
	return hal.Link{Caps: hal.CapMemoryMapped | hal.CapPortMapped | hal.CapSwitchMapped}
}

// Close aborts the launches still queued or running that use the device's
// memory, waits for them until WEFT_TIMEOUT from now, then leaves every
// multicast group still joined, unmaps every buffer still mapped and
// removes the files it owns. Errors: those of the multicast groups' Close
// and the buffers' Free (hal.ErrInvalidUsage when launches were aborted,
// hal.ErrTimeout for memory left mapped because a launch outlived the
// deadline).
func (d *Device) Close() error {
	d.mu.Lock()
	regs := append([]*region(nil), d.regions...)
	mcs := append([]*multicast(nil), d.mcs...)
	d.closed = true
	d.mu.Unlock()
	deadline := time.Now().Add(env.Timeout())
	var first error
	for _, m := range mcs {
		if err := m.close(deadline); err != nil && first == nil {
			first = err
		}
	}
	for _, r := range regs {
		if err := r.free(deadline); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// hostID identifies this machine and IPC namespace: processes with the same
// value can share /dev/shm.
func hostID() string {
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/ipc")
	return strings.TrimSpace(string(boot)) + "/" + ns
}
