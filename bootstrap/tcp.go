package bootstrap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
)

// Connect joins rank of a size-rank job over TCP: it sends its hello to
// the root named by id (retrying while the root is not yet listening),
// receives the address of every rank, and then connects to every other
// rank, dialling the lower ranks and accepting the higher ones, so that
// each pair of ranks shares one connection. It returns once this rank is
// connected to all others.
//
// The mesh listener binds the interface named by WEFT_SOCKET_IFNAME, or
// else the local address of the connection to the root (the interface
// that routes to it). Rendezvous must finish by ctx's deadline, or within
// WEFT_BOOTSTRAP_TIMEOUT when ctx has none.
//
// Errors wrap hal.ErrInvalidArgument (size < 1, rank outside [0, size), a
// zero id, the root refused a duplicate rank or a different size),
// hal.ErrTimeout (the root or a peer did not answer in time; the message
// names which), hal.ErrRemote (a peer or the root failed or sent a bad
// message) or hal.ErrSystem (no socket).
func Connect(ctx context.Context, id UniqueID, rank, size int) (Bootstrap, error) {
	if size < 1 || size > maxRanks {
		return nil, fmt.Errorf("bootstrap: size %d outside [1, %d]: %w", size, maxRanks, hal.ErrInvalidArgument)
	}
	if rank < 0 || rank >= size {
		return nil, fmt.Errorf("bootstrap: rank %d outside [0, %d): %w", rank, size, hal.ErrInvalidArgument)
	}
	if id.Magic == 0 || checkHostPort(id.Addr) != nil {
		return nil, fmt.Errorf("bootstrap: invalid unique id (zero magic or root %q); create one with NewUniqueID or FromEnv: %w", id.Addr, hal.ErrInvalidArgument)
	}
	timeout, err := bootstrapTimeout()
	if err != nil {
		return nil, err
	}
	encrypt, err := encryptFromEnv(id.Secret)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c := &connector{core: newCore(rank, size, timeout), magic: id.Magic, secret: id.Secret, encrypt: encrypt, root: id.Addr, start: time.Now()}
	if id.Secret.IsZero() {
		auth.WarnUnauthenticated(c.log, "bootstrap rank")
	}
	conns, err := c.rendezvous(ctx)
	if err != nil {
		c.log.Warn("bootstrap connect failed", "err", err)
		return nil, err
	}
	b := &tcpBootstrap{core: c.core, magic: id.Magic, secret: id.Secret, peers: make([]*peerConn, size)}
	b.tx = b
	for p, conn := range conns {
		if conn == nil {
			continue
		}
		conn.SetDeadline(time.Time{})
		b.peers[p] = &peerConn{rank: p, conn: conn, wlock: make(chan struct{}, 1)}
	}
	for _, pc := range b.peers {
		if pc != nil {
			b.readers.Add(1)
			go b.readLoop(pc)
		}
	}
	c.log.Info("bootstrap connected", "root", id.Addr, "elapsed", time.Since(c.start).Round(time.Microsecond))
	return b, nil
}

// connector holds the state of one Connect call.
type connector struct {
	*core
	magic   uint64
	secret  Secret // zero: unauthenticated
	encrypt bool
	root    string
	start   time.Time
}

// authConfig is the handshake of one kind of connection of this job.
func (c *connector) authConfig(p auth.Proto) auth.Config {
	ctx := rootContext(c.magic)
	if p == auth.ProtoBootMesh {
		ctx = meshContext(c.magic, c.size)
	}
	return auth.Config{Secret: c.secret, Proto: p, Encrypt: c.encrypt, Context: ctx, Timeout: c.timeout}
}

// rendezvous returns the mesh connections, indexed by peer rank (nil at
// this rank).
func (c *connector) rendezvous(ctx context.Context) ([]net.Conn, error) {
	rc, err := c.dialRoot(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if !c.secret.IsZero() {
		ac, err := auth.Client(rc, c.authConfig(auth.ProtoBootRoot))
		if err != nil {
			return nil, fmt.Errorf("bootstrap: rank %d: the root at %s: %w", c.rank, c.root, err)
		}
		rc = ac
	}
	stop := context.AfterFunc(ctx, func() { rc.SetDeadline(time.Now()) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		rc.SetDeadline(d)
	}

	var ip net.IP
	if spec := socketIfname(); spec != "" {
		if ip, err = interfaceIP(spec); err != nil {
			return nil, err
		}
	} else if ta, ok := rc.LocalAddr().(*net.TCPAddr); ok {
		ip = ta.IP
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return nil, fmt.Errorf("bootstrap: rank %d: mesh listener on %v: %w: %w", c.rank, ip, err, hal.ErrSystem)
	}
	defer ln.Close()

	hl := encodeHello(hello{size: c.size, addr: ln.Addr().String()})
	if err := writeFrame(rc, header{magic: c.magic, typ: msgHello, src: uint32(c.rank)}, hl); err != nil {
		return nil, c.rootErr(ctx, "send hello", err)
	}
	h, payload, err := readFrame(rc, c.magic)
	if err != nil {
		return nil, c.rootErr(ctx, "wait for the peer table", err)
	}
	switch h.typ {
	case msgPeers:
	case msgReject:
		sentinel := hal.ErrInvalidArgument
		if h.tag == rejectRemote {
			sentinel = hal.ErrRemote
		}
		return nil, fmt.Errorf("bootstrap: rank %d: the root at %s refused the rendezvous: %s: %w", c.rank, c.root, payload, sentinel)
	default:
		return nil, remoteErr("the root at "+c.root, fmt.Errorf("%w: got %v, want peers", errBadType, h.typ))
	}
	addrs, err := decodePeers(payload, c.size)
	if err != nil {
		return nil, remoteErr("the root at "+c.root, err)
	}
	rc.Close()
	c.log.Debug("bootstrap peer table received", "peers", addrs)
	return c.mesh(ctx, ln, addrs)
}

// dialRoot connects to the root, retrying with backoff until ctx ends:
// under mpirun, srun or torchrun the root starts in rank 0 at the same
// time as the other ranks.
func (c *connector) dialRoot(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	backoff := 10 * time.Millisecond
	for {
		conn, err := d.DialContext(ctx, "tcp", c.root)
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("bootstrap: rank %d: could not reach the root at %s within %v: %v (is the process that hosts it running — the creator of the unique id, or rank 0 under mpirun/srun/torchrun — and is the address reachable from here?): %w",
				c.rank, c.root, time.Since(c.start).Round(time.Millisecond), err, hal.ErrTimeout)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// rootErr describes a failure on the connection to the root.
func (c *connector) rootErr(ctx context.Context, step string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("bootstrap: rank %d: rendezvous with the root at %s (%s): %w", c.rank, c.root, step, ctx.Err())
	}
	if ctx.Err() != nil {
		return fmt.Errorf("bootstrap: rank %d: rendezvous with the root at %s timed out after %v (%s): not all %d ranks arrived: %w",
			c.rank, c.root, time.Since(c.start).Round(time.Millisecond), step, c.size, hal.ErrTimeout)
	}
	if err == io.EOF {
		return fmt.Errorf("bootstrap: rank %d: %s: the root at %s closed the connection (it stopped or served another job): %w", c.rank, step, c.root, hal.ErrRemote)
	}
	if isProtocolErr(err) {
		return remoteErr("the root at "+c.root, err)
	}
	return fmt.Errorf("bootstrap: rank %d: %s: root %s: %w: %w", c.rank, step, c.root, err, hal.ErrRemote)
}

func isProtocolErr(err error) bool {
	for _, e := range []error{errBadMagic, errTruncated, errTooLarge, errBadType, errVersion, errMalformed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

type meshResult struct {
	peer int
	conn net.Conn
	err  error
}

// mesh connects this rank to every other: it dials ranks below it and
// accepts ranks above it. A connection to the listener that is not a
// well-formed hello of this job (wrong magic, garbage, a rank that is not
// expected) is logged and closed; it does not fail the job.
func (c *connector) mesh(ctx context.Context, ln net.Listener, addrs []string) ([]net.Conn, error) {
	conns := make([]net.Conn, c.size)
	results := make(chan meshResult)
	done := make(chan struct{})
	defer close(done)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	deadline, _ := ctx.Deadline()

	if c.rank < c.size-1 {
		gate := auth.NewGate(auth.MaxPending)
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				if !gate.Enter() {
					c.log.Warn("bootstrap: too many unauthenticated mesh connections: closed one at once", "remote", conn.RemoteAddr().String())
					conn.Close()
					continue
				}
				go func() {
					defer gate.Leave()
					c.acceptOne(conn, deadline, results, done)
				}()
			}
		}()
	}
	for p := range c.rank {
		go c.dialOne(ctx, p, addrs[p], deadline, results, done)
	}
	closeAll := func() {
		for _, conn := range conns {
			if conn != nil {
				conn.Close()
			}
		}
	}
	for need := c.size - 1; need > 0; {
		select {
		case r := <-results:
			if r.err != nil {
				closeAll()
				return nil, r.err
			}
			if conns[r.peer] != nil {
				c.log.Warn("bootstrap: second connection claiming the same rank dropped", "peer", r.peer, "remote", r.conn.RemoteAddr().String())
				r.conn.Close()
				continue
			}
			conns[r.peer] = r.conn
			need--
		case <-ctx.Done():
			closeAll()
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, fmt.Errorf("bootstrap: rank %d: connecting the mesh: %w", c.rank, ctx.Err())
			}
			var missing []int
			for p, conn := range conns {
				if conn == nil && p != c.rank {
					missing = append(missing, p)
				}
			}
			return nil, fmt.Errorf("bootstrap: rank %d: connecting the mesh timed out after %v waiting for %s: %w",
				c.rank, time.Since(c.start).Round(time.Millisecond), ranksText(missing), hal.ErrTimeout)
		}
	}
	return conns, nil
}

func (c *connector) acceptOne(conn net.Conn, deadline time.Time, results chan<- meshResult, done <-chan struct{}) {
	drop := func(err error) {
		if errors.Is(err, auth.ErrAuth) {
			c.log.Warn("bootstrap: authentication failed from "+conn.RemoteAddr().String(), "remote", conn.RemoteAddr().String(), "err", err)
		} else {
			c.log.Warn("bootstrap: refused a mesh connection", "remote", conn.RemoteAddr().String(), "err", err)
		}
		conn.Close()
	}
	if !c.secret.IsZero() {
		ac, err := auth.Server(conn, c.authConfig(auth.ProtoBootMesh))
		if err != nil {
			drop(err)
			return
		}
		conn = ac
	}
	conn.SetDeadline(deadline)
	h, _, err := readFrame(conn, c.magic)
	if err != nil {
		drop(err)
		return
	}
	p := int(h.src)
	switch {
	case h.typ != msgMeshHello:
		drop(fmt.Errorf("%w: got %v, want mesh-hello", errBadType, h.typ))
		return
	case int(h.tag) != c.size:
		drop(fmt.Errorf("%w: rank %d says the job has %d ranks, want %d", errMalformed, p, h.tag, c.size))
		return
	case int64(h.src) <= int64(c.rank) || int64(h.src) >= int64(c.size):
		drop(fmt.Errorf("%w: rank %d must not dial rank %d", errMalformed, h.src, c.rank))
		return
	}
	if err := writeFrame(conn, header{magic: c.magic, typ: msgMeshAck, src: uint32(c.rank), tag: uint32(c.size)}, nil); err != nil {
		drop(err)
		return
	}
	select {
	case results <- meshResult{peer: p, conn: conn}:
	case <-done:
		conn.Close()
	}
}

func (c *connector) dialOne(ctx context.Context, p int, addr string, deadline time.Time, results chan<- meshResult, done <-chan struct{}) {
	r := meshResult{peer: p}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil && !c.secret.IsZero() {
		var ac net.Conn
		if ac, err = auth.Client(conn, c.authConfig(auth.ProtoBootMesh)); err == nil {
			conn = ac
		}
	}
	if err == nil {
		conn.SetDeadline(deadline)
		err = writeFrame(conn, header{magic: c.magic, typ: msgMeshHello, src: uint32(c.rank), tag: uint32(c.size)}, nil)
	}
	if err == nil {
		var h header
		h, _, err = readFrame(conn, c.magic)
		switch {
		case err == io.EOF:
			err = errors.New("it closed the connection during the handshake")
		case err != nil:
		case h.typ != msgMeshAck || int(h.src) != p || int(h.tag) != c.size:
			err = fmt.Errorf("%w: unexpected %v from rank %d (job of %d ranks)", errMalformed, h.typ, h.src, h.tag)
		}
	}
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		if ctx.Err() != nil {
			r.err = fmt.Errorf("bootstrap: rank %d: connecting to rank %d at %s timed out: %w", c.rank, p, addr, hal.ErrTimeout)
		} else {
			r.err = fmt.Errorf("bootstrap: rank %d: connecting to rank %d at %s: %w: %w", c.rank, p, addr, err, hal.ErrRemote)
		}
	} else {
		r.conn = conn
	}
	select {
	case results <- r:
	case <-done:
		if r.conn != nil {
			r.conn.Close()
		}
	}
}

// tcpBootstrap is a connected rank of a TCP job.
type tcpBootstrap struct {
	*core
	magic   uint64
	secret  Secret
	peers   []*peerConn // nil at this rank
	readers sync.WaitGroup
}

// peerConn is the connection to one peer. wlock serialises writers and,
// being a channel, lets a writer give up waiting at its deadline.
type peerConn struct {
	rank  int
	conn  net.Conn
	wlock chan struct{}
}

func (b *tcpBootstrap) deliver(ctx context.Context, deadline time.Time, peer int, typ msgType, tag uint32, data []byte) error {
	pc := b.peers[peer]
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case pc.wlock <- struct{}{}:
	case <-timer.C:
		return fmt.Errorf("bootstrap: rank %d: send %v to rank %d timed out waiting for earlier sends to it: %w", b.rank, typ, peer, hal.ErrTimeout)
	case <-ctx.Done():
		return b.check(ctx, "send "+typ.String())
	case <-b.failed:
		return b.check(ctx, "send "+typ.String())
	case <-b.closed:
		return b.check(ctx, "send "+typ.String())
	}
	defer func() { <-pc.wlock }()
	pc.conn.SetWriteDeadline(deadline)
	err := writeFrame(pc.conn, header{magic: b.magic, typ: typ, src: uint32(b.rank), tag: tag}, data)
	if err == nil {
		return nil
	}
	if b.closing.Load() {
		return b.check(ctx, "send "+typ.String())
	}
	// A failed or partial write leaves the stream unusable: the peer is
	// lost for this job.
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		b.fail(fmt.Errorf("bootstrap: rank %d stopped reading (seen by rank %d): a %d-byte write timed out: %w", peer, b.rank, len(data), hal.ErrRemote))
		return fmt.Errorf("bootstrap: rank %d: send %v to rank %d timed out: %w", b.rank, typ, peer, hal.ErrTimeout)
	}
	e := b.disconnected(peer, err)
	b.fail(e)
	return e
}

// readLoop moves messages from one peer into the mailbox until the peer
// says goodbye, this rank closes, or the connection fails.
func (b *tcpBootstrap) readLoop(pc *peerConn) {
	defer b.readers.Done()
	r := bufio.NewReader(pc.conn) // 4 KiB: large payloads bypass it

	from := fmt.Sprintf("rank %d", pc.rank)
	for {
		h, payload, err := readFrame(r, b.magic)
		if err != nil {
			if b.closing.Load() {
				return
			}
			switch {
			case err == io.EOF:
				b.fail(b.disconnected(pc.rank, errors.New("connection closed without goodbye")))
			case errors.Is(err, errTruncated):
				b.fail(b.disconnected(pc.rank, err))
			case isProtocolErr(err):
				b.fail(remoteErr(from, err))
			default:
				b.fail(b.disconnected(pc.rank, err))
			}
			return
		}
		if int(h.src) != pc.rank {
			b.fail(remoteErr(from, fmt.Errorf("%w: message claims source rank %d", errMalformed, h.src)))
			return
		}
		switch h.typ {
		case msgData:
			b.box.put(mkey{peer: pc.rank, tag: h.tag}, mail{h.typ, payload})
		case msgAllGather, msgBroadcast, msgBarrier:
			b.box.put(mkey{coll: true, peer: pc.rank, tag: h.tag}, mail{h.typ, payload})
		case msgProgressQuery, msgProgress:
			b.progressIn(pc.rank, h.typ, h.tag, payload)
		case msgBye:
			b.log.Debug("bootstrap peer said goodbye", "peer", pc.rank)
			b.box.setGone(pc.rank)
			return
		default:
			b.fail(remoteErr(from, fmt.Errorf("%w: %v on a mesh connection", errBadType, h.typ)))
			return
		}
	}
}

// Close sends goodbye to every peer that is still connected (waiting at
// most a second per peer for a send in progress), then closes the
// connections and waits for the reader goroutines to stop.
func (b *tcpBootstrap) Close() error {
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		close(b.closed)
		var wg sync.WaitGroup
		for _, pc := range b.peers {
			if pc == nil {
				continue
			}
			wg.Go(func() {
				t := time.NewTimer(time.Second)
				defer t.Stop()
				select {
				case pc.wlock <- struct{}{}:
					if !b.box.isGone(pc.rank) {
						pc.conn.SetWriteDeadline(time.Now().Add(time.Second))
						writeFrame(pc.conn, header{magic: b.magic, typ: msgBye, src: uint32(b.rank)}, nil)
					}
					<-pc.wlock
				case <-t.C:
				}
				pc.conn.Close()
			})
		}
		wg.Wait()
		b.readers.Wait()
		b.log.Info("bootstrap closed")
	})
	return nil
}

// crash closes every connection without a goodbye, as the death of the
// process would. For tests.
func (b *tcpBootstrap) crash() {
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		close(b.closed)
		for _, pc := range b.peers {
			if pc != nil {
				pc.conn.Close()
			}
		}
		b.readers.Wait()
	})
}

// DeriveKey returns a 32-byte key for one use of the job's secret, named by
// label (HKDF-SHA256): the socket transport's connections authenticate with
// it. It returns nil in an unauthenticated job. The secret itself is never
// returned.
func (b *tcpBootstrap) DeriveKey(label string) []byte { return b.secret.Derive(label) }
