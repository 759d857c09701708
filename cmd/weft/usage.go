package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/hip"
)

// jobRanks checks, in the process that starts a job and before anything
// starts, what a multi-rank command (bench, soak) was given: the backend
// (--hal, else WEFT_HAL, else the first available) must be registered and
// available, and the rank count one that the plans of colls serve (the
// collectives the command will run). nproc 0 asks for the default: one
// rank per device of the backend, at least 2 (ranks then share a device),
// so that a run without --nproc measures a collective between ranks. It
// returns the rank count. Inside a job that a launcher started, nproc is
// not used and is returned as it is.
//
// The rank limit is what the plans report for each collective with the
// defaults for nproc ranks on memory-mapped links (servesRanks): none for
// the collectives with plans with bounded peers, nor for AllToAll and
// point-to-point, which past algorithms.PeerPlansMaxRanks run over peer
// windows (algorithms.P2PWindowPlans).
//
// Errors: ErrInvalidArgument for an unknown backend or a rank count that
// a collective's plans do not serve, naming it; ErrNotSupported for a
// backend that cannot run on this machine.
func jobRanks(what string, nproc int, halName string, colls []algorithms.Collective) (int, error) {
	if _, inJob, err := bootstrap.FromEnv(); err != nil || inJob {
		return nproc, err
	}
	if halName == "" {
		halName = env.String("WEFT_HAL")
	}
	var err error
	if halName == "" {
		if halName, _, err = hal.Auto(); err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
	}
	b, err := hal.Lookup(halName)
	if err != nil {
		return 0, fmt.Errorf("%s: --hal: %w", what, err)
	}
	if a := b.Probe(); !a.Available {
		return 0, fmt.Errorf("%s: backend %s is not available here: %s: %w", what, halName, a.Reason, hal.ErrNotSupported)
	}
	if nproc == 0 {
		nproc = defaultRanks(halName)
	}
	if nproc < 1 {
		return 0, fmt.Errorf("%s: --nproc %d: want at least 1 rank: %w", what, nproc, hal.ErrInvalidArgument)
	}
	for _, coll := range colls {
		// Rank 0 and the last rank: every rank's plans have the same
		// shape limits.
		for _, r := range []int{0, nproc - 1} {
			if err := servesRanks(algorithms.DefaultConfig(r, nproc, 1, false), coll); err != nil {
				return 0, fmt.Errorf("%s: --nproc %d: %v has no plan for %d ranks (%v): %w", what, nproc, coll, nproc, err, hal.ErrInvalidArgument)
			}
		}
	}
	return nproc, nil
}

// servesRanks reports whether a communicator serves coll for rank c.Rank
// of c.NRanks: the collective's plans (algorithms.Plans), or, for AllToAll
// and point-to-point past algorithms.PeerPlansMaxRanks, the plans of every
// peer window of the rank (algorithms.P2PWindowPlans: the communicator
// runs AllToAll as a group of sends and receives there).
func servesRanks(c algorithms.Config, coll algorithms.Collective) error {
	if (coll != algorithms.AllToAll && coll != algorithms.SendRecv) || c.NRanks <= algorithms.PeerPlansMaxRanks {
		_, err := algorithms.Plans(c, coll, 0)
		return err
	}
	ws, err := algorithms.P2PWindows(c.Rank, c.NRanks)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if _, err := algorithms.P2PWindowPlans(c, w); err != nil {
			return err
		}
	}
	return nil
}

// defaultRanks is the rank count of a command given no --nproc: the
// backend's devices (CUDA for nvlink and pcie, HIP for xgmi), at least 2;
// 2 for the others (hal/host and networks).
func defaultRanks(halName string) int {
	var n int
	var err error
	switch halName {
	case "nvlink", "pcie", "nvswitch":
		n, err = cuda.DeviceCount()
	case "xgmi":
		n, err = hip.DeviceCount()
	}
	if err != nil {
		n = 0
	}
	return max(n, 2)
}

// rankErrors is the standard error of a job's ranks: it passes every
// line through except the final error lines of weft ranks ("weft: …",
// "[rank N] weft: …"), which it keeps and, at Flush, prints once per
// distinct message with the ranks that printed it ("weft: ranks 0-3,5:
// …"). A message that names its own rank ("rank 3") is compared with the
// number replaced, so that the same failure on every rank prints once.
type rankErrors struct {
	mu    sync.Mutex
	w     io.Writer
	buf   bytes.Buffer
	order []string
	ranks map[string][]int
}

var rankErrLine = regexp.MustCompile(`^(?:\[rank (\d+)\] )?weft: (.*)$`)

func newRankErrors(w io.Writer) *rankErrors { return &rankErrors{w: w, ranks: map[string][]int{}} }

func (r *rankErrors) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf.Write(p)
	for {
		i := bytes.IndexByte(r.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(r.buf.Next(i + 1))
		if m := rankErrLine.FindStringSubmatch(strings.TrimSuffix(line, "\n")); m != nil {
			rank, _ := strconv.Atoi(m[1]) // no prefix: rank 0
			msg := strings.ReplaceAll(m[2], "rank "+strconv.Itoa(rank)+":", "rank N:")
			if _, ok := r.ranks[msg]; !ok {
				r.order = append(r.order, msg)
			}
			r.ranks[msg] = append(r.ranks[msg], rank)
			continue
		}
		if _, err := io.WriteString(r.w, line); err != nil {
			return len(p), err
		}
	}
}

// Flush prints the kept error lines, one per message, and any partial
// last line.
func (r *rankErrors) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf.Len() > 0 {
		r.w.Write(r.buf.Bytes())
		r.buf.Reset()
	}
	bw := bufio.NewWriter(r.w)
	for _, msg := range r.order {
		ranks := r.ranks[msg]
		sort.Ints(ranks)
		fmt.Fprintf(bw, "weft: %s: %s\n", rankList(ranks), msg)
	}
	bw.Flush()
	r.order, r.ranks = nil, map[string][]int{}
}

// rankList is "rank 3" or "ranks 0-3,5".
func rankList(ranks []int) string {
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(ranks[0])
	}
	var parts []string
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ranks[i], ranks[j]))
		} else {
			parts = append(parts, strconv.Itoa(ranks[i]))
		}
		i = j + 1
	}
	return "ranks " + strings.Join(parts, ",")
}
