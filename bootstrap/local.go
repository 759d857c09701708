package bootstrap

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/weftccl/weft/hal"
)

// NewLocal returns size Bootstraps connected in process, element r being
// rank r, for ranks that run as goroutines of one process (tests, a single
// process driving several devices). Semantics are those of Connect:
// messages are copied, collectives match by order, Close says goodbye, and
// deadlines come from ctx or WEFT_BOOTSTRAP_TIMEOUT (60 s when unset or
// malformed). It returns nil when size < 1.
func NewLocal(size int) []Bootstrap {
	if size < 1 {
		return nil
	}
	timeout, err := bootstrapTimeout()
	if err != nil {
		timeout = defaultTimeout
	}
	// The ranks share a random secret, so that what they set up over the
	// network (DeriveKey) is authenticated as in a TCP job. Without
	// randomness they run unauthenticated.
	secret, _ := NewSecret()
	members := make([]*localBootstrap, size)
	out := make([]Bootstrap, size)
	for r := range size {
		b := &localBootstrap{core: newCore(r, size, timeout), members: members, secret: secret}
		b.tx = b
		members[r] = b
		out[r] = b
	}
	if err != nil {
		members[0].log.Warn("ignoring malformed WEFT_BOOTSTRAP_TIMEOUT", "err", err, "timeout", timeout)
	}
	return out
}

// localBootstrap is one rank of NewLocal. Delivery puts a copy of the data
// straight into the peer's mailbox.
type localBootstrap struct {
	*core
	members []*localBootstrap
	secret  Secret
}

// DeriveKey is tcpBootstrap.DeriveKey for ranks of one process.
func (b *localBootstrap) DeriveKey(label string) []byte { return b.secret.Derive(label) }

func (b *localBootstrap) deliver(ctx context.Context, deadline time.Time, peer int, typ msgType, tag uint32, data []byte) error {
	dst := b.members[peer]
	select {
	case <-dst.closed:
		return fmt.Errorf("bootstrap: rank %d: send %v to rank %d: it has closed its bootstrap: %w", b.rank, typ, peer, hal.ErrRemote)
	default:
	}
	if typ == msgProgressQuery || typ == msgProgress {
		dst.progressIn(b.rank, typ, tag, slices.Clone(data))
		return nil
	}
	dst.box.put(mkey{coll: typ != msgData, peer: b.rank, tag: tag}, mail{typ, slices.Clone(data)})
	return nil
}

// Close marks this rank gone for its peers; pending calls of this rank
// return an error wrapping hal.ErrInvalidUsage.
func (b *localBootstrap) Close() error {
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		close(b.closed)
		for _, m := range b.members {
			if m != b {
				m.box.setGone(b.rank)
			}
		}
	})
	return nil
}

// crash simulates the death of this rank: its peers see it disappear
// without a goodbye. For tests.
func (b *localBootstrap) crash() {
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		close(b.closed)
		for _, m := range b.members {
			if m != b {
				m.fail(m.disconnected(b.rank, nil))
			}
		}
	})
}
