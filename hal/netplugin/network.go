package netplugin

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/ncclnet"
)

// Name is the network's registry name (WEFT_NET=plugin).
const Name = "plugin"

// PluginVar is the environment variable that names the plugin, as for
// NCCL itself.
const PluginVar = "NCCL_NET_PLUGIN"

// Defaults of the options.
const (
	DefaultChunk     = 256 << 10
	DefaultSendSlots = 8
	DefaultRecvSlots = 8
)

func init() { hal.RegisterNetwork(network{}) }

type network struct{}

func (network) Name() string { return Name }

// Probe loads the plugin NCCL_NET_PLUGIN names and counts its devices:
// "NCCL_NET_PLUGIN unset", "cannot load NCCL net plugin "x": reason",
// "net plugin x reports 0 devices", or, when available, the plugin's
// name, library and first device. A loaded plugin stays loaded (a plugin
// is initialised once per process, as under NCCL).
func (network) Probe() hal.Availability {
	name := env.String(PluginVar)
	if name == "" {
		return hal.Availability{Reason: PluginVar + " unset"}
	}
	p, err := ncclnet.Load(name)
	if err != nil {
		return hal.Availability{Reason: err.Error()}
	}
	n, err := p.Devices()
	if err != nil {
		return hal.Availability{Reason: fmt.Sprintf("net plugin %s: %v", p.Name(), err)}
	}
	if n < 1 {
		return hal.Availability{Reason: fmt.Sprintf("net plugin %s (%s) reports 0 devices", p.Name(), p.Path())}
	}
	desc := fmt.Sprintf("net plugin %s (%s), %d device(s)", p.Name(), p.Path(), n)
	if pr, err := p.Properties(0); err == nil {
		desc += fmt.Sprintf("; device 0: %s, %d Mbit/s", pr.Name, pr.SpeedMbps)
	}
	return hal.Availability{Available: true, Reason: desc}
}

// Open loads the plugin NCCL_NET_PLUGIN names and opens the transport for
// dev with default options.
func (network) Open(dev hal.Device, cfg hal.NetConfig) (hal.NetDevice, error) {
	return Open(dev, cfg, Options{Plugin: env.String(PluginVar)})
}

// Options configure a NetDevice. Zero fields take their defaults.
type Options struct {
	// Plugin is NCCL_NET_PLUGIN's value: a name ("aws-ofi" loads
	// libnccl-net-aws-ofi.so) or a library path (ncclnet.Candidates).
	// Required.
	Plugin string
	// Device is the plugin's device index the transport uses, 0 to
	// Devices()−1; default 0.
	Device int
	// Chunk is the largest payload of one message in bytes, MinChunk to
	// MaxChunk: puts are cut into chunks of this size, each staged and
	// sent on its own. Default 256 KiB. Ranks may differ; a sender uses
	// the smaller of its own and its receiver's.
	Chunk int
	// SendSlots and RecvSlots are the staging slots (header + chunk
	// bytes each) of every peer link and direction: the messages in
	// flight, and the receives kept posted. 1 to 32 (NCCL's
	// NCCL_NET_MAX_REQUESTS); default 8 each.
	SendSlots, RecvSlots int
	// Timeout bounds every wait: a connection, a message without
	// progress, Close. WEFT_TIMEOUT, 10 s.
	Timeout time.Duration
	// Logger receives the transport's records; nil takes the NET logger
	// of WEFT_DEBUG.
	Logger *slog.Logger

	hooks *testHooks // tests only
}

// testHooks let tests of this package disturb the transport.
type testHooks struct {
	// beforeSend may rewrite a message's header just before it is sent.
	beforeSend func(hdr []byte)
}

func (o Options) withDefaults() (Options, error) {
	if o.Chunk == 0 {
		o.Chunk = DefaultChunk
	}
	if o.SendSlots == 0 {
		o.SendSlots = DefaultSendSlots
	}
	if o.RecvSlots == 0 {
		o.RecvSlots = DefaultRecvSlots
	}
	if o.Timeout <= 0 {
		o.Timeout = env.Timeout()
	}
	if o.Logger == nil {
		o.Logger = env.Logger("NET")
	}
	switch {
	case o.Plugin == "":
		return o, fmt.Errorf("netplugin: %s unset: name the NCCL net plugin to load (a name such as aws-ofi, or a library path): %w", PluginVar, hal.ErrNotSupported)
	case o.Chunk < MinChunk || o.Chunk > MaxChunk:
		return o, fmt.Errorf("netplugin: chunk of %d bytes: want %d to %d: %w", o.Chunk, MinChunk, MaxChunk, hal.ErrInvalidArgument)
	case o.SendSlots < 1 || o.SendSlots > ncclnet.MaxRequests || o.RecvSlots < 1 || o.RecvSlots > ncclnet.MaxRequests:
		return o, fmt.Errorf("netplugin: %d send and %d receive slots: want 1 to %d each: %w", o.SendSlots, o.RecvSlots, ncclnet.MaxRequests, hal.ErrInvalidArgument)
	case o.Device < 0:
		return o, fmt.Errorf("netplugin: device %d: %w", o.Device, hal.ErrInvalidArgument)
	}
	return o, nil
}
