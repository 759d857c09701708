package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
)

// soakOptions are the flags of `weft soak`.
type soakOptions struct {
	seed     uint64
	ops      int
	maxBytes string
	nproc    int
	hal      string
	colls    string
	types    string
}

var soakOpts soakOptions

var soakCmd = &cobra.Command{
	Use:   "soak [flags]",
	Short: "run many randomized collectives and check every element",
	Long: `soak runs -n collectives drawn at random from one seed that every rank
shares: the collective (all_reduce, all_gather, reduce_scatter, broadcast,
reduce, alltoall, or a group of sends and receives), the data type, the
reduction, the size (most draws small, some up to --max-bytes), the root,
and in or out of place. Groups of sends and receives follow a drawn
pattern: a ring with a drawn shift, pairwise exchange, gather to or scatter
from a root, a random permutation, or all-to-all-v with drawn counts (some
blocks split into two operations to the same peer). Every element of every
result is checked exactly.

It prints one summary line (operations run, wrong elements, time) and, for
every operation that went wrong, a report naming it with its parameters
and rerunning instructions (the seed). The exit status is non-zero on any
wrong element or error. --seed 0 draws a seed, printed in the summary.`,
	Example: `  weft soak --nproc 4 --hal host -n 10000
  weft soak --nproc 2 -n 100000 --max-bytes 64M --seed 42`,
	Args: cobra.NoArgs,
	RunE: runSoak,
}

func init() {
	f := soakCmd.Flags()
	o := &soakOpts
	f.Uint64Var(&o.seed, "seed", 0, "seed of the draws, the same on every rank (0: draw one and print it)")
	f.IntVarP(&o.ops, "ops", "n", 10000, "number of operations")
	f.StringVar(&o.maxBytes, "max-bytes", "1M", "largest buffer of an operation, per rank (suffixes K, M, G)")
	f.IntVar(&o.nproc, "nproc", 0, "processes (ranks) to start, one per device (0: one per device of the backend, at least 2)")
	f.StringVar(&o.hal, "hal", "", "HAL backend (default: WEFT_HAL, else the first available of nvlink, xgmi, pcie, host)")
	f.StringVar(&o.colls, "collectives", "", "comma-separated collectives to draw from (default: all)")
	f.StringVar(&o.types, "types", "", "comma-separated data types to draw from (default: all)")
	rootCmd.AddCommand(soakCmd)
}

// soakConfig is the validated form of the flags.
type soakConfig struct {
	seed     uint64
	ops      int
	maxBytes int64
	halName  string
	colls    []algorithms.Collective
	types    []plan.DataType
}

func (o *soakOptions) validate() (*soakConfig, error) {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("soak: %s: %w", fmt.Sprintf(f, a...), hal.ErrInvalidArgument)
	}
	c := &soakConfig{seed: o.seed, ops: o.ops, halName: o.hal, colls: algorithms.Collectives, types: plan.DataTypes}
	var err error
	if c.maxBytes, err = parseSize(o.maxBytes); err != nil {
		return nil, err
	}
	if c.maxBytes < 16 {
		return nil, bad("--max-bytes %d: want at least 16", c.maxBytes)
	}
	if o.ops < 0 || o.nproc < 0 {
		return nil, bad("-n %d --nproc %d: want -n ≥ 0 and --nproc ≥ 1 (0: one per device)", o.ops, o.nproc)
	}
	if o.colls != "" {
		c.colls = nil
		for _, s := range strings.Split(o.colls, ",") {
			k, err := algorithms.ParseCollective(strings.TrimSpace(s))
			if err != nil {
				return nil, bad("--collectives: %v", err)
			}
			c.colls = append(c.colls, k)
		}
	}
	if o.types != "" {
		c.types = nil
		for _, s := range strings.Split(o.types, ",") {
			t, err := plan.ParseDataType(strings.TrimSpace(s))
			if err != nil {
				return nil, bad("--types: %v", err)
			}
			c.types = append(c.types, t)
		}
	}
	return c, nil
}

func runSoak(cmd *cobra.Command, args []string) error {
	cfg, err := soakOpts.validate()
	if err != nil {
		return err
	}
	nproc, err := jobRanks("soak", soakOpts.nproc, soakOpts.hal, cfg.colls)
	if err != nil {
		return err
	}
	job, err := joinJob(cmd, "soak", nproc)
	if job == nil || err != nil {
		return err
	}
	defer job.boot.Close()
	_, err = soakRank(job.ctx, cfg, job.boot, job.localRank, job.jobID, weft.Options{}, job.out)
	return err
}

// soakFailure is one operation that went wrong on one rank.
type soakFailure struct {
	Op    int    `json:"op"`
	Rank  int    `json:"rank"`
	Call  string `json:"call"`
	Wrong int64  `json:"wrong"`
	First int64  `json:"first_wrong_element"`
	Error string `json:"error,omitempty"`
}

// soakSummary is the outcome of a soak over all ranks.
type soakSummary struct {
	Seed     uint64        `json:"seed"`
	Ranks    int           `json:"ranks"`
	Ops      int           `json:"ops"`
	Wrong    int64         `json:"wrong"`
	Failures []soakFailure `json:"failures"`
	Seconds  float64       `json:"seconds"`
}

// maxReported bounds the failures each rank reports.
const maxReported = 20

// soakRank is one rank of a soak: it opens the device and communicator,
// runs the drawn operations, checks each, and returns the summary of all
// ranks (rank 0 prints it to out). The error is non-nil when any element
// was wrong or any operation failed.
func soakRank(ctx context.Context, cfg *soakConfig, boot bootstrap.Bootstrap, localRank int, jobID string, opts weft.Options,
	out io.Writer) (*soakSummary, error) {
	rank, n := boot.Rank(), boot.Size()
	halName := cfg.halName
	if halName == "" {
		halName = env.String("WEFT_HAL")
	}
	var err error
	if halName == "" {
		if halName, _, err = hal.Auto(); err != nil {
			return nil, fmt.Errorf("soak: rank %d: %w", rank, err)
		}
	}
	dev, err := hal.Open(halName, hal.Config{Ordinal: localRank, Rank: rank, JobID: jobID})
	if err != nil {
		return nil, fmt.Errorf("soak: rank %d: %w", rank, err)
	}
	defer dev.Close()
	comm, err := weft.NewComm(ctx, boot, dev, opts)
	if err != nil {
		return nil, fmt.Errorf("soak: rank %d: %w", rank, err)
	}
	defer comm.Close()
	s, err := dev.NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	in, err := dev.Alloc(cfg.maxBytes)
	if err != nil {
		return nil, fmt.Errorf("soak: rank %d: buffer of %d bytes: %w", rank, cfg.maxBytes, err)
	}
	defer in.Free()
	outBuf, err := dev.Alloc(cfg.maxBytes)
	if err != nil {
		return nil, fmt.Errorf("soak: rank %d: buffer of %d bytes: %w", rank, cfg.maxBytes, err)
	}
	defer outBuf.Free()

	seed := cfg.seed
	if seed == 0 {
		// Rank 0 draws the seed; every rank uses it.
		var b [8]byte
		rand.Read(b[:])
		all, err := boot.Broadcast(ctx, 0, b[:])
		if err != nil || len(all) != 8 {
			return nil, fmt.Errorf("soak: rank %d: broadcast the seed: %v: %w", rank, err, hal.ErrRemote)
		}
		seed = binary.LittleEndian.Uint64(all) | 1
	}
	impl := weftColl{c: comm, raw: true}
	d := newSoakDrawer(cfg, seed, n)
	var mine []soakFailure
	var wrong int64
	var opErr error
	start := time.Now()
	done := 0
	for i := 0; i < cfg.ops; i++ {
		c := d.draw(rank, in, outBuf)
		w, first, err := soakOne(dev, impl, s, &c, rank, n)
		if err != nil {
			mine = append(mine, soakFailure{Op: i, Rank: rank, Call: describe(&c), Error: err.Error()})
			opErr = fmt.Errorf("soak: rank %d: op %d (%s): %w", rank, i, describe(&c), err)
			break
		}
		done++
		if w != 0 {
			wrong += w
			if len(mine) < maxReported {
				mine = append(mine, soakFailure{Op: i, Rank: rank, Call: describe(&c), Wrong: w, First: first})
			}
		}
	}
	elapsed := time.Since(start)
	if opErr != nil && n > 1 {
		// The other ranks may be waiting in the operation that failed
		// here; they time out (WEFT_TIMEOUT) and report it themselves.
		return nil, opErr
	}
	sum, err := gatherSoak(ctx, boot, soakSummary{Seed: seed, Ranks: n, Ops: done, Wrong: wrong, Failures: mine, Seconds: elapsed.Seconds()})
	if err != nil {
		return nil, err
	}
	printSoak(out, sum, halName)
	if opErr != nil {
		return sum, opErr
	}
	if sum.Wrong != 0 {
		return sum, fmt.Errorf("soak: %d wrong elements in %d operations (seed %d): %w", sum.Wrong, len(sum.Failures), seed, hal.ErrInternal)
	}
	return sum, nil
}

// soakOne prepares, runs and checks one operation.
func soakOne(dev hal.Device, impl weftColl, s hal.Stream, c *collCall, rank, n int) (wrong, first int64, err error) {
	if c.matrix != nil {
		return soakP2P(dev, impl, s, c, rank, n)
	}
	if err := prepare(dev, c, rank, n); err != nil {
		return 0, -1, err
	}
	if err := impl.run(c, s); err != nil {
		return 0, -1, err
	}
	if err := impl.synchronize(s); err != nil {
		return 0, -1, err
	}
	return verify(dev, c, rank, n)
}

// gatherSoak combines the ranks' summaries: the slowest rank's time, the
// sum of wrong elements, every rank's failures ordered by operation.
func gatherSoak(ctx context.Context, boot bootstrap.Bootstrap, mine soakSummary) (*soakSummary, error) {
	b, _ := json.Marshal(mine)
	all, err := boot.AllGather(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("soak: gather results: %w", err)
	}
	sum := &soakSummary{Seed: mine.Seed, Ranks: len(all), Ops: math.MaxInt}
	for r, x := range all {
		var v soakSummary
		if err := json.Unmarshal(x, &v); err != nil {
			return nil, fmt.Errorf("soak: rank %d sent malformed results: %v: %w", r, err, hal.ErrRemote)
		}
		sum.Ops = min(sum.Ops, v.Ops)
		sum.Wrong += v.Wrong
		sum.Seconds = max(sum.Seconds, v.Seconds)
		sum.Failures = append(sum.Failures, v.Failures...)
	}
	for i := 1; i < len(sum.Failures); i++ {
		for j := i; j > 0 && sum.Failures[j].Op < sum.Failures[j-1].Op; j-- {
			sum.Failures[j], sum.Failures[j-1] = sum.Failures[j-1], sum.Failures[j]
		}
	}
	return sum, nil
}

func printSoak(w io.Writer, s *soakSummary, halName string) {
	status := "OK"
	if s.Wrong != 0 || len(s.Failures) != 0 {
		status = "FAILED"
	}
	fmt.Fprintf(w, "soak: %d ops on %d ranks (%s, seed %d): %d wrong elements, %.1f s: %s\n",
		s.Ops, s.Ranks, halName, s.Seed, s.Wrong, s.Seconds, status)
	for _, f := range s.Failures {
		if f.Error != "" {
			fmt.Fprintf(w, "  op %d rank %d: %s: %s\n", f.Op, f.Rank, f.Call, f.Error)
			continue
		}
		fmt.Fprintf(w, "  op %d rank %d: %s: %d wrong elements, the first at element %d\n", f.Op, f.Rank, f.Call, f.Wrong, f.First)
	}
	if status != "OK" {
		fmt.Fprintf(w, "  rerun with --seed %d (and the same -n, --max-bytes, --collectives, --types and rank count)\n", s.Seed)
	}
}

// soakDrawer draws operations; every rank holds one with the same seed
// and draws the same sequence.
type soakDrawer struct {
	cfg  *soakConfig
	rng  *mrand.Rand
	n    int
	seed uint64
	i    uint64
}

func newSoakDrawer(cfg *soakConfig, seed uint64, n int) *soakDrawer {
	return &soakDrawer{cfg: cfg, rng: mrand.New(mrand.NewPCG(seed, 0x77656674)), n: n, seed: seed}
}

// bytes draws a buffer size: mostly up to 4 KiB, a sixth of the draws up
// to the maximum, log-uniformly, and now and then 0.
func (d *soakDrawer) bytes() int64 {
	limit := min(int64(4096), d.cfg.maxBytes)
	if d.rng.IntN(6) == 0 {
		limit = d.cfg.maxBytes
	}
	if d.rng.IntN(50) == 0 {
		return 0
	}
	e := d.rng.Float64() * math.Log2(float64(limit))
	return min(int64(math.Exp2(e))+d.rng.Int64N(8), limit)
}

// draw returns this rank's part of the next operation on buffers in and
// out.
func (d *soakDrawer) draw(rank int, in, out hal.Buffer) collCall {
	r := d.rng
	d.i++
	coll := d.cfg.colls[r.IntN(len(d.cfg.colls))]
	t := d.cfg.types[r.IntN(len(d.cfg.types))]
	op := plan.RedOps[r.IntN(len(plan.RedOps))]
	root := r.IntN(d.n)
	inPlace := r.IntN(2) == 0
	bytes := d.bytes()
	es := int64(t.Size())
	if coll == algorithms.SendRecv {
		c := collCall{coll: coll, send: in, recv: out, dtype: t, op: plan.Sum}
		c.p2p, c.matrix = d.pattern(rank, bytes/es, es)
		return c
	}
	sendSegs, recvSegs := coll.Segments(d.n)
	count := bytes / es / int64(max(sendSegs, recvSegs))
	c := layout(coll, in, out, rank, count, t, inPlace)
	if coll.Reduces() {
		c.op = op
		if op == plan.PreMulSum {
			c.scalar = check.PreMulScalar(t, rank) // each rank its own
		}
	}
	if coll.Rooted() {
		c.root = root
	}
	return c
}

// pattern draws a group of sends and receives as a matrix of element
// counts m[src][dst] (0: no operation) and returns this rank's
// operations, in an order drawn for this rank. Send blocks lie in the send
// buffer by destination, receive blocks in the receive buffer by source.
// The element budget bounds every rank's send and receive totals.
func (d *soakDrawer) pattern(rank int, budget, es int64) ([]p2pOp, [][]int64) {
	n, r := d.n, d.rng
	m := make([][]int64, n)
	for i := range m {
		m[i] = make([]int64, n)
	}
	per := budget / int64(n) // an all-to-all-v block
	switch kind := r.IntN(6); kind {
	case 0: // ring with a drawn shift (0: each rank to itself)
		k := r.IntN(n)
		for i := 0; i < n; i++ {
			m[i][(i+k)%n] = budget
		}
	case 1: // pairwise exchange: 0↔1, 2↔3, …; an odd last rank idles
		for i := 0; i+1 < n; i += 2 {
			m[i][i+1], m[i+1][i] = budget, budget
		}
	case 2: // gather to a root
		root := r.IntN(n)
		for i := 0; i < n; i++ {
			m[i][root] = per
		}
	case 3: // scatter from a root
		root := r.IntN(n)
		for i := 0; i < n; i++ {
			m[root][i] = per
		}
	case 4: // a random permutation
		for i, p := range r.Perm(n) {
			m[i][p] = budget
		}
	default: // all-to-all-v with drawn counts, some pairs idle
		for i := range m {
			for j := range m[i] {
				if per > 0 && r.IntN(4) != 0 {
					m[i][j] = r.Int64N(per + 1)
				}
			}
		}
	}
	split := r.IntN(4) == 0 // each block as two operations to the same peer
	var ops []p2pOp
	var off int64
	add := func(peer int, send bool, off, cnt int64) {
		if !split || cnt < 2 {
			ops = append(ops, p2pOp{peer: peer, send: send, off: off * es, bytes: cnt * es})
			return
		}
		h := cnt / 2
		ops = append(ops, p2pOp{peer: peer, send: send, off: off * es, bytes: h * es},
			p2pOp{peer: peer, send: send, off: (off + h) * es, bytes: (cnt - h) * es})
	}
	for dst := 0; dst < n; dst++ {
		if m[rank][dst] > 0 {
			add(dst, true, off, m[rank][dst])
		}
		off += m[rank][dst]
	}
	off = 0
	for src := 0; src < n; src++ {
		if m[src][rank] > 0 {
			add(src, false, off, m[src][rank])
		}
		off += m[src][rank]
	}
	// Shuffle this rank's operations with a rank-local generator (the
	// shared one stays in step), then put the operations to one peer in
	// one direction back in their order: the k-th send to a peer matches
	// the peer's k-th receive.
	lr := mrand.New(mrand.NewPCG(d.seed^d.i, uint64(rank)))
	shuffled := append(make([]p2pOp, 0, len(ops)), ops...) // never nil: nil means nccl-tests' ring
	lr.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	type key struct {
		peer int
		send bool
	}
	next := map[key][]p2pOp{}
	for _, o := range ops {
		k := key{o.peer, o.send}
		next[k] = append(next[k], o)
	}
	for i, o := range shuffled {
		k := key{o.peer, o.send}
		shuffled[i], next[k] = next[k][0], next[k][1:]
	}
	return shuffled, m
}

// p2pBlock is the data rank src sends to rank dst in a drawn pattern:
// cnt elements of a stream of its own, (src, dst)-dependent.
func p2pBlock(t plan.DataType, n, src, dst int, cnt int64) []byte {
	return check.Input(t, plan.Sum, src*n+dst, cnt)
}

// soakP2P runs one drawn group of sends and receives and checks every
// received element against the blocks the senders wrote.
func soakP2P(dev hal.Device, impl weftColl, s hal.Stream, c *collCall, rank, n int) (wrong, first int64, err error) {
	var sendData, want []byte
	for dst := 0; dst < n; dst++ {
		sendData = append(sendData, p2pBlock(c.dtype, n, rank, dst, c.matrix[rank][dst])...)
	}
	for src := 0; src < n; src++ {
		want = append(want, p2pBlock(c.dtype, n, src, rank, c.matrix[src][rank])...)
	}
	if len(want) > 0 {
		p := make([]byte, len(want))
		for i := range p {
			p[i] = poison
		}
		if err := dev.Write(c.recv, c.recvOff, p); err != nil {
			return 0, -1, err
		}
	}
	if len(sendData) > 0 {
		if err := dev.Write(c.send, c.sendOff, sendData); err != nil {
			return 0, -1, err
		}
	}
	if err := impl.run(c, s); err != nil {
		return 0, -1, err
	}
	if err := impl.synchronize(s); err != nil {
		return 0, -1, err
	}
	if len(want) == 0 {
		return 0, -1, nil
	}
	got := make([]byte, len(want))
	if err := dev.Read(got, c.recv, c.recvOff); err != nil {
		return 0, -1, err
	}
	return wrongElems(c.dtype, plan.Sum, got, want), firstWrong(c.dtype, got, want), nil
}
