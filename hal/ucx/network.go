package ucx

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/ucx"
)

// Name is the network's registry name (WEFT_NET=ucx).
const Name = "ucx"

func init() { hal.RegisterNetwork(network{}) }

type network struct{}

func (network) Name() string { return Name }

// Probe reports whether UCX can run here: its libraries load and a
// context and worker with the features weft needs can be created under
// the environment's UCX_* settings ("UCX 1.13.1 (libucp.so.0)"), or why
// not ("libucp.so.0 not found: …", "weft built without cgo", the failing
// UCX call). The answer is kept per set of UCX_* variables; the context
// is destroyed at once.
func (network) Probe() hal.Availability { return Probe() }

var probes sync.Map // UCX_* environment -> hal.Availability

// Probe is the network's Probe.
func Probe() hal.Availability {
	l, err := ucx.Load()
	if err != nil {
		return hal.Availability{Reason: err.Error()}
	}
	var key strings.Builder
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "UCX_") {
			key.WriteString(kv)
			key.WriteByte(0)
		}
	}
	if a, ok := probes.Load(key.String()); ok {
		return a.(hal.Availability)
	}
	a := hal.Availability{Available: true, Reason: "UCX " + l.Version() + " (" + ucx.DefaultUCP + ")"}
	ctx, err := l.NewContext(ucx.FeatureRMA|ucx.FeatureAM|ucx.FeatureWakeup, nil)
	if err == nil {
		var w *ucx.Worker
		if w, err = ctx.NewWorker(amID, maxSignal); err == nil {
			_, err = w.Address()
			w.Close()
		}
		ctx.Close()
	}
	if err != nil {
		a = hal.Availability{Reason: "UCX " + l.Version() + " cannot run here: " + err.Error()}
	}
	probes.Store(key.String(), a)
	return a
}

// Open opens the network for dev with OptionsFromEnv.
func (network) Open(dev hal.Device, cfg hal.NetConfig) (hal.NetDevice, error) {
	opts, err := OptionsFromEnv()
	if err != nil {
		return nil, err
	}
	return Open(dev, cfg, opts)
}

// Staging says how memory that peers write into, and sources of puts,
// are reached.
type Staging int

const (
	// StagingAuto registers host memory (hal/host devices) directly, GPU
	// memory directly where UCX reports the GPU's memory type (a UCX built
	// with CUDA or ROCm), and stages other device memory through host
	// memory with the device's own engine.
	StagingAuto Staging = iota
	// StagingAlways stages every buffer through host memory, as for a GPU
	// that UCX cannot reach (tests use it over hal/host).
	StagingAlways
	// StagingDevice treats device memory as UCX cannot reach it (staged,
	// whatever memory types UCX reports) and registers memory with a host
	// view (Device.AllocHost, all of hal/host's) directly: the host
	// windows of a GPU that UCX cannot reach (HostWindows), which StagingAuto
	// also takes there; over hal/host, tests of that path.
	StagingDevice
)

// Options configure a NetDevice. Zero fields take their defaults.
type Options struct {
	// Timeout bounds every wait: a flush, a put or active message without
	// progress, the side channel's handshake, Close. WEFT_TIMEOUT.
	Timeout time.Duration
	// Chunk is the size of the host staging slots through which a put of
	// memory UCX cannot read is sent (default 1 MiB, 4 KiB to 64 MiB).
	Chunk int64
	// Staging selects how buffers are registered.
	Staging Staging
	// Settings override UCX_* variables for this NetDevice's context
	// (keys without the prefix: "TLS": "tcp"). Open adds NET_DEVICES=lo
	// for a job on one host unless UCX_NET_DEVICES or this map sets it.
	Settings map[string]string
	// IfName selects the interface the authenticating side channel
	// listens on (WEFT_SOCKET_IFNAME's syntax, as hal/socket); unset: the
	// first interface that is up and neither loopback nor docker, else
	// loopback; one host: loopback.
	IfName string
	// Logger receives the transport's records; nil takes the NET logger.
	Logger *slog.Logger
	// Spin is how long the progress loop keeps polling the worker after
	// it last had work before it arms the worker and sleeps on its event
	// descriptor (a wake-up costs 10–20 µs on a virtual machine).
	// WEFT_UCX_SPIN_US; 0 takes DefaultSpin.
	Spin time.Duration
}

// DefaultSpin is Options.Spin's default.
const DefaultSpin = 50 * time.Microsecond

// maxSpin bounds Options.Spin (WEFT_UCX_SPIN_US).
const maxSpin = time.Second

// OptionsFromEnv reads WEFT_TIMEOUT, WEFT_SOCKET_IFNAME, WEFT_UCX_SPIN_US
// and WEFT_UCX_STAGING (auto, always or device); UCX reads its own UCX_* variables. A
// malformed value is an error wrapping hal.ErrInvalidArgument that names
// the variable.
func OptionsFromEnv() (Options, error) {
	o := Options{Timeout: env.Timeout(), IfName: env.String("WEFT_SOCKET_IFNAME")}
	switch v := strings.TrimSpace(env.String("WEFT_UCX_STAGING")); v {
	case "", "auto":
	case "always":
		o.Staging = StagingAlways
	case "device":
		o.Staging = StagingDevice
	default:
		return o, fmt.Errorf("ucx: WEFT_UCX_STAGING=%q: want auto, always or device: %w", v, hal.ErrInvalidArgument)
	}
	if us, ok, err := env.Int("WEFT_UCX_SPIN_US"); err != nil || (ok && (us < 1 || time.Duration(us)*time.Microsecond > maxSpin)) {
		return o, fmt.Errorf("ucx: WEFT_UCX_SPIN_US=%q: want 1 to %d microseconds: %w", env.String("WEFT_UCX_SPIN_US"), maxSpin/time.Microsecond, hal.ErrInvalidArgument)
	} else if ok {
		o.Spin = time.Duration(us) * time.Microsecond
	}
	return o, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Timeout <= 0 {
		o.Timeout = env.Timeout()
	}
	if o.Chunk == 0 {
		o.Chunk = 1 << 20
	}
	if o.Spin == 0 {
		o.Spin = DefaultSpin
	}
	if o.Spin < 0 || o.Spin > maxSpin {
		return o, fmt.Errorf("ucx: progress polling of %v: want up to %v: %w", o.Spin, maxSpin, hal.ErrInvalidArgument)
	}
	if o.Logger == nil {
		o.Logger = env.Logger("NET")
	}
	if o.Chunk < 4<<10 || o.Chunk > 64<<20 {
		return o, fmt.Errorf("ucx: staging chunk of %d bytes: want 4 KiB to 64 MiB: %w", o.Chunk, hal.ErrInvalidArgument)
	}
	if o.Staging != StagingAuto && o.Staging != StagingAlways && o.Staging != StagingDevice {
		return o, fmt.Errorf("ucx: staging mode %d: %w", o.Staging, hal.ErrInvalidArgument)
	}
	return o, nil
}

// sideAddress picks the IP the side channel listens on: loopback for a
// job on one host, else the first interface that spec selects (NCCL's
// syntax: prefixes, "^" excludes, "=" exact), by default one that is up
// and neither loopback nor docker, else loopback.
func sideAddress(spec string, oneHost bool) (net.IP, string, error) {
	if oneHost && spec == "" {
		return net.IPv4(127, 0, 0, 1), "lo (one host)", nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, "", fmt.Errorf("ucx: list interfaces: %v: %w", err, hal.ErrSystem)
	}
	exclude, exact := false, false
	s := strings.TrimSpace(spec)
	if strings.HasPrefix(s, "^") {
		exclude, s = true, s[1:]
	}
	if strings.HasPrefix(s, "=") {
		exact, s = true, s[1:]
	}
	var names []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			names = append(names, f)
		}
	}
	match := func(n string) bool {
		for _, x := range names {
			if exact && n == x || !exact && strings.HasPrefix(n, x) {
				return true
			}
		}
		return false
	}
	var lo net.IP
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := i.Addrs()
		var ip net.IP
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
				if ip == nil || (ip.To4() == nil && n.IP.To4() != nil) {
					ip = n.IP
				}
			}
		}
		if ip == nil {
			continue
		}
		if len(names) == 0 {
			if i.Flags&net.FlagLoopback != 0 {
				lo = ip
				continue
			}
			if strings.HasPrefix(i.Name, "docker") {
				continue
			}
			return ip, i.Name, nil
		}
		if match(i.Name) != exclude {
			return ip, i.Name, nil
		}
	}
	if len(names) == 0 && lo != nil {
		return lo, "loopback (no other interface is up)", nil
	}
	return nil, "", fmt.Errorf("ucx: no interface matches WEFT_SOCKET_IFNAME=%q for the side channel: %w", spec, hal.ErrNotSupported)
}
