package weft

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/bootstrap"
)

// judge names the ranks that stopped making progress from a probe seen
// by rank 0: silent and unreachable ranks, ranks behind every other
// answering rank, and — only when nothing else is found — ranks that left
// without announcing a verdict.
func TestJudge(t *testing.T) {
	ans := func(r int, report string) bootstrap.PeerProgress {
		return bootstrap.PeerProgress{Rank: r, State: bootstrap.PeerAnswered, Report: []byte(report)}
	}
	st := func(r int, s bootstrap.PeerState, report string) bootstrap.PeerProgress {
		return bootstrap.PeerProgress{Rank: r, State: s, Report: []byte(report)}
	}
	for _, tc := range []struct {
		name  string
		peers []bootstrap.PeerProgress
		want  []int
	}{
		{"silent", []bootstrap.PeerProgress{ans(0, `{"calls":5}`), st(1, bootstrap.PeerSilent, ""), ans(2, `{"calls":5}`)}, []int{1}},
		{"unreachable and silent", []bootstrap.PeerProgress{ans(0, `{"calls":5}`), st(1, bootstrap.PeerUnreachable, ""), st(2, bootstrap.PeerSilent, "")}, []int{1, 2}},
		{"behind", []bootstrap.PeerProgress{ans(0, `{"calls":5}`), ans(1, `{"calls":5}`), ans(2, `{"calls":4}`)}, []int{2}},
		{"ahead is not behind", []bootstrap.PeerProgress{ans(0, `{"calls":5}`), ans(1, `{"calls":6}`), ans(2, `{"calls":5}`)}, nil},
		{"all equal", []bootstrap.PeerProgress{ans(0, `{"calls":5}`), ans(1, `{"calls":5}`), ans(2, `{"calls":5}`)}, nil},
		{"left after its verdict", []bootstrap.PeerProgress{ans(0, `{"calls":5}`), st(1, bootstrap.PeerLeft, `{"calls":5,"stalled":[2]}`), st(2, bootstrap.PeerSilent, "")}, []int{2}},
		{"left early", []bootstrap.PeerProgress{ans(0, `{"calls":5}`), st(1, bootstrap.PeerLeft, ""), ans(2, `{"calls":5}`)}, []int{1}},
		{"left early beside a silent rank", []bootstrap.PeerProgress{ans(0, `{"calls":5}`), st(1, bootstrap.PeerLeft, ""), st(2, bootstrap.PeerSilent, "")}, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := judge(0, tc.peers, time.Second)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ranks (-want +got):\n%s", diff)
			}
			if len(why) != len(got) {
				t.Errorf("%d reasons for %d ranks: %q", len(why), len(got), why)
			}
		})
	}
}
