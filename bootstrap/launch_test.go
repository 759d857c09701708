package bootstrap

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weftccl/weft/hal"
)

// launchEnv lists every variable FromEnv reads.
var launchEnv = []string{
	"WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK", "WEFT_UNIQUE_ID",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
	"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_JOBID",
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
	"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID",
	"MASTER_ADDR", "MASTER_PORT",
}

// setLaunchEnv clears every launcher variable (FromEnv treats empty as
// unset), then sets vars.
func setLaunchEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, k := range launchEnv {
		t.Setenv(k, "")
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

func TestFromEnv(t *testing.T) {
	id := UniqueID{Magic: 0xfeed, Addr: "127.0.0.1:4242"}
	master := map[string]string{"MASTER_ADDR": "node01", "MASTER_PORT": "29500"}
	with := func(base map[string]string, more map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	ignoreMagic := cmpopts.IgnoreFields(UniqueID{}, "Magic")
	tests := []struct {
		name    string
		env     map[string]string
		want    Launch
		wantOK  bool
		opts    []cmp.Option
		wantErr string // substring; the error must wrap ErrInvalidArgument
	}{
		{name: "nothing", env: nil, wantOK: false},
		{name: "weft run", env: map[string]string{"WEFT_RANK": "2", "WEFT_NRANKS": "4", "WEFT_LOCAL_RANK": "2", "WEFT_UNIQUE_ID": id.String()},
			wantOK: true, want: Launch{Rank: 2, Size: 4, LocalRank: 2, ID: id, Source: "weft run"}},
		{name: "weft run, no local rank", env: map[string]string{"WEFT_RANK": "1", "WEFT_NRANKS": "2", "WEFT_UNIQUE_ID": id.String()},
			wantOK: true, want: Launch{Rank: 1, Size: 2, LocalRank: 1, ID: id, Source: "weft run"}},
		{name: "weft run wins over mpirun", env: map[string]string{"WEFT_RANK": "0", "WEFT_NRANKS": "1", "WEFT_UNIQUE_ID": id.String(), "OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8"},
			wantOK: true, want: Launch{Rank: 0, Size: 1, LocalRank: 0, ID: id, Source: "weft run"}},
		{name: "open mpi", env: with(master, map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}),
			wantOK: true, opts: []cmp.Option{ignoreMagic}, want: Launch{Rank: 3, Size: 8, LocalRank: 1, ID: UniqueID{Addr: "node01:29500"}, Source: "mpirun"}},
		{name: "open mpi rank 0 hosts the root", env: with(master, map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}),
			wantOK: true, opts: []cmp.Option{ignoreMagic}, want: Launch{Rank: 0, Size: 8, LocalRank: 0, ID: UniqueID{Addr: "node01:29500"}, Source: "mpirun", ServeRoot: true}},
		{name: "open mpi with a unique id", env: map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "WEFT_UNIQUE_ID": id.String()},
			wantOK: true, want: Launch{Rank: 0, Size: 2, LocalRank: 0, ID: id, Source: "mpirun"}},
		{name: "mpich", env: with(master, map[string]string{"PMI_RANK": "5", "PMI_SIZE": "6", "MPI_LOCALRANKID": "1"}),
			wantOK: true, opts: []cmp.Option{ignoreMagic}, want: Launch{Rank: 5, Size: 6, LocalRank: 1, ID: UniqueID{Addr: "node01:29500"}, Source: "mpirun"}},
		{name: "srun", env: with(master, map[string]string{"SLURM_PROCID": "7", "SLURM_NTASKS": "16", "SLURM_LOCALID": "3", "SLURM_JOB_ID": "1234"}),
			wantOK: true, opts: []cmp.Option{ignoreMagic}, want: Launch{Rank: 7, Size: 16, LocalRank: 3, ID: UniqueID{Addr: "node01:29500"}, Source: "srun"}},
		{name: "mpirun inside a slurm allocation", env: with(master, map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4"}),
			wantOK: true, opts: []cmp.Option{ignoreMagic}, want: Launch{Rank: 2, Size: 4, LocalRank: 2, ID: UniqueID{Addr: "node01:29500"}, Source: "mpirun"}},
		{name: "torchrun", env: with(master, map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}),
			wantOK: true, opts: []cmp.Option{ignoreMagic}, want: Launch{Rank: 1, Size: 2, LocalRank: 1, ID: UniqueID{Addr: "node01:29500"}, Source: "torchrun"}},
		{name: "torchrun agent store takes MASTER_PORT", env: with(master, map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "TORCHELASTIC_USE_AGENT_STORE": "True"}),
			wantOK: true, opts: []cmp.Option{ignoreMagic}, want: Launch{Rank: 0, Size: 2, LocalRank: 0, ID: UniqueID{Addr: "node01:29501"}, Source: "torchrun", ServeRoot: true}},
		{name: "torchrun under srun", env: with(master, map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1"}),
			wantOK: true, opts: []cmp.Option{ignoreMagic}, want: Launch{Rank: 9, Size: 16, LocalRank: 1, ID: UniqueID{Addr: "node01:29500"}, Source: "torchrun"}},
		{name: "ipv6 master", env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "MASTER_ADDR": "fd00::1", "MASTER_PORT": "1234"},
			wantOK: true, opts: []cmp.Option{ignoreMagic}, want: Launch{Rank: 0, Size: 2, LocalRank: 0, ID: UniqueID{Addr: "[fd00::1]:1234"}, Source: "srun", ServeRoot: true}},

		{name: "no size", env: map[string]string{"OMPI_COMM_WORLD_RANK": "1"}, wantOK: true, wantErr: "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"},
		{name: "rank not a number", env: map[string]string{"SLURM_PROCID": "one", "SLURM_NTASKS": "2"}, wantOK: true, wantErr: `SLURM_PROCID="one" (set by srun): want an integer`},
		{name: "rank too large", env: map[string]string{"WEFT_RANK": "4", "WEFT_NRANKS": "4", "WEFT_UNIQUE_ID": id.String()}, wantOK: true, wantErr: "WEFT_RANK=4 outside [0, WEFT_NRANKS=4)"},
		{name: "size zero", env: map[string]string{"PMI_RANK": "0", "PMI_SIZE": "0"}, wantOK: true, wantErr: "PMI_SIZE=0"},
		{name: "negative local rank", env: map[string]string{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "-1"}, wantOK: true, wantErr: "LOCAL_RANK=-1 is negative"},
		{name: "no rendezvous address", env: map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8"}, wantOK: true,
			wantErr: "rank 3 of 8 (from mpirun) has no rendezvous address: set MASTER_ADDR"},
		{name: "bad port", env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "MASTER_ADDR": "n", "MASTER_PORT": "http"}, wantOK: true, wantErr: `MASTER_PORT="http"`},
		{name: "bad unique id", env: map[string]string{"WEFT_RANK": "0", "WEFT_NRANKS": "1", "WEFT_UNIQUE_ID": "xyz"}, wantOK: true, wantErr: "WEFT_UNIQUE_ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setLaunchEnv(t, tc.env)
			got, ok, err := FromEnv()
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if tc.wantErr != "" {
				if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error = %v, want ErrInvalidArgument with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, tc.opts...); diff != "" {
				t.Errorf("Launch (-want +got):\n%s", diff)
			}
			if ok && got.ID.Magic == 0 {
				t.Errorf("zero magic")
			}
		})
	}
}

// TestDerivedMagic: every rank of a job derives the same magic; another
// job id or address gives another.
func TestDerivedMagic(t *testing.T) {
	magic := func(vars map[string]string) uint64 {
		t.Helper()
		setLaunchEnv(t, vars)
		l, _, err := FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		return l.ID.Magic
	}
	job := func(rank, jobID, port string) map[string]string {
		return map[string]string{"SLURM_PROCID": rank, "SLURM_NTASKS": "4", "SLURM_JOB_ID": jobID, "MASTER_ADDR": "node01", "MASTER_PORT": port}
	}
	base := magic(job("0", "77", "29500"))
	tests := []struct {
		name string
		vars map[string]string
		same bool
	}{
		{"other rank", job("3", "77", "29500"), true},
		{"other job", job("0", "78", "29500"), false},
		{"other port", job("0", "77", "29501"), false},
	}
	for _, tc := range tests {
		if got := magic(tc.vars); (got == base) != tc.same {
			t.Errorf("%s: magic %#x vs %#x, want same=%v", tc.name, got, base, tc.same)
		}
	}
}

// TestLaunchConnectServesRoot forms a job the way mpirun would: each rank
// reads its own environment, rank 0 hosts the root at MASTER_PORT.
func TestLaunchConnectServesRoot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	const n = 3
	launches := make([]Launch, n)
	for r := range n {
		setLaunchEnv(t, map[string]string{
			"OMPI_COMM_WORLD_RANK": strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE": strconv.Itoa(n),
			"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": strconv.Itoa(port),
		})
		l, ok, err := FromEnv()
		if !ok || err != nil {
			t.Fatalf("rank %d: FromEnv = %v, %v", r, ok, err)
		}
		launches[r] = l
	}
	ctx := testCtx(t)
	bs := make([]Bootstrap, n)
	errs := make([]error, n)
	done := make(chan int, n)
	// Other ranks start before rank 0's root exists, and must retry.
	for r := n - 1; r >= 0; r-- {
		go func() { bs[r], errs[r] = launches[r].Connect(ctx); done <- r }()
	}
	for range n {
		<-done
	}
	noErrors(t, "Launch.Connect", errs)
	t.Cleanup(func() { closeAll(bs) })
	got, errs := onAll(bs, func(b Bootstrap) ([]byte, error) { return b.Broadcast(ctx, 0, []byte("go")) })
	noErrors(t, "Broadcast", errs)
	if diff := cmp.Diff([][]byte{[]byte("go"), []byte("go"), []byte("go")}, got); diff != "" {
		t.Errorf("Broadcast (-want +got):\n%s", diff)
	}
}

func TestLaunchConnectPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := Launch{Rank: 0, Size: 2, ID: UniqueID{Magic: 1, Addr: ln.Addr().String()}, ServeRoot: true}
	_, err = l.Connect(context.Background())
	if !errors.Is(err, hal.ErrSystem) || !strings.Contains(err.Error(), "cannot host the root on port") {
		t.Errorf("Connect = %v, want ErrSystem about the port", err)
	}
}
