package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Port-channel plans of the collectives that move data one way (Broadcast,
// Reduce) and of point-to-point, so that every collective has a plan over
// port channels, the only channels that reach peers on other nodes (a
// network's engines; channels.Network). They keep the windowed structure
// of port.go: a sender puts window w into its slot of the receiver's
// scratch and signals "data"; the receiver has the slot copied out by the
// same channel's engine (or reduces it on SMs) and signals "free", which
// the sender takes as a credit when it reuses the half (rolling windows,
// port.go), and every group flushes the channels it used so that the
// launch ends with its copies complete.

// oneWayDepth is the window depth (plan.Plan.WindowDepth) of the
// one-way port plans over a network's host windows.
const oneWayDepth = 4

// oneWay is the window depth and window of c's one-way port plans
// (Broadcast, Reduce, point-to-point). Over a network's host windows
// (stageSends): four windows of half the port window — the same host
// memory as two of the whole — so that a writer runs up to four windows
// ahead of its reader's releases. With two, a Broadcast of 256 KB–1 MB
// over sockets waited every other launch for the release of the one
// before, a round trip through both proxies (on 2×H100: put frame 55 µs,
// the release's hop 22, the reader's copy out 25, the root's staging 16;
// 256 KB Broadcast 93 → 59–84 µs, Reduce 121 → 63–67: docs/network.md,
// "Releases and two workers"). Otherwise two windows of the port window.
func (c Config) oneWay() (depth int, window int64) {
	if c.stageSends() {
		return oneWayDepth, max(plan.AlignBytes, c.Port.Window/2/plan.AlignBytes*plan.AlignBytes)
	}
	return 2, c.Port.Window
}

// oneWayGroup is portGroup for the one-way plans, with their window.
func (c Config) oneWayGroup(b int, ops, after []plan.Op) plan.Group {
	_, w := c.oneWay()
	g := c.portGroup(b, 1, ops, after)
	g.Window = w
	return g
}

// oneWayCredits are a one-way writer's rolling credit waits
// (rollingCredits), as many releases behind as the plan's depth.
func (c Config) oneWayCredits(chs []int, s int) []plan.Op {
	d, _ := c.oneWay()
	return creditWaits(chs, s, d)
}

// oneWayPlan is portPlan for the one-way plans (their depth).
func (c Config) oneWayPlan(name string, b, slots, sems int, groups ...plan.Group) (*plan.Plan, error) {
	d, _ := c.oneWay()
	return c.portPlanOn(c.portChannels(), d, name, b, slots, sems, groups...)
}

// BroadcastPort is Broadcast through engines: the root puts each input
// window into its slot of every peer and has channel 0's engine copy it
// into its own output; every other rank has its engine copy the slot into
// its output.
func BroadcastPort(c Config, root int) (*plan.Plan, error) {
	if err := c.validateRoot(root); err != nil {
		return nil, err
	}
	chs, all := c.channels(), c.others()
	var g plan.Group
	if c.Rank == root {
		var puts []plan.Op
		for ci, ch := range chs {
			// The root receives nothing: its slots stage the puts
			// (stageSends).
			put := plan.PortPut(ci, 0, 1, plan.RS(ci, slotOf(root, ch.Peer)), plan.L(plan.Input))
			put.Stage = c.stage(0, ci)
			puts = append(puts, put)
		}
		if len(chs) > 0 {
			puts = append(puts, c.localCopy(0, 0, 1, plan.L(plan.Output), plan.L(plan.Input)))
		}
		g = rolling(c.oneWayGroup(1, cat(c.oneWayCredits(all, sem(semFree, 1)), puts, signals(all, sem(semData, 1))), flushes(all)), all[0], sem(semFree, 1))
	} else {
		rc := []int{c.chanOf(root)}
		g = rolling(c.oneWayGroup(1, cat(waits(rc, sem(semData, 1)), []plan.Op{c.localCopy(rc[0], 0, 1, plan.L(plan.Output), plan.LS(rc[0]))},
			releases(rc, sem(semFree, 1))), flushes(rc)), rc[0], sem(semData, 1))
	}
	return c.oneWayPlan(fmt.Sprintf("broadcast-r%d", root), 1, len(chs), 2, g)
}

// ReducePort is Reduce through engines: every rank but the root puts each
// input window into its slot of the root's scratch; the root combines its
// input with the slots on SMs (Port.Blocks blocks) into its output.
func ReducePort(c Config, root int) (*plan.Plan, error) {
	if err := c.validateRoot(root); err != nil {
		return nil, err
	}
	all := c.others()
	b := c.portBlocks()
	var g plan.Group
	if c.Rank == root {
		srcs := []plan.Ref{plan.L(plan.Input)}
		for _, ci := range all {
			srcs = append(srcs, plan.LS(ci))
		}
		red := combineChain(xfer, plan.L(plan.Output), srcs)
		g = rolling(c.oneWayGroup(b, cat(waits(all, sem(semData, b)), red, releases(all, sem(semFree, b))), flushes(all)), all[0], sem(semData, b))
	} else {
		rc := []int{c.chanOf(root)}
		put := plan.PortPut(rc[0], 0, 1, plan.RS(rc[0], slotOf(c.Rank, root)), plan.L(plan.Input))
		// No peer writes this rank's slots (only the root receives): one
		// stages PreMulSum's scaled input (plan.Op.Stage).
		put.Stage = 1 + rc[0]
		g = rolling(c.oneWayGroup(b, cat(c.oneWayCredits(rc, sem(semFree, b)), []plan.Op{put}, signals(rc, sem(semData, b))), flushes(rc)), rc[0], sem(semFree, b))
	}
	return c.oneWayPlan(fmt.Sprintf("reduce-r%d", root), b, len(all), 2, g)
}

// P2PPort is P2PPlan over port channels, with the same argument slots
// (SendArg, RecvArg, SelfArg): for channel i a send group whose engine
// puts each window into this rank's slot of the peer's scratch, and a
// receive group whose engine copies the slot into the output; the copy to
// itself runs on SMs. Data type: raw bytes (plan.Uint8).
func P2PPort(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	chs := c.channels()
	var groups []plan.Group
	for ci, ch := range chs {
		one := []int{ci}
		put := plan.PortPut(ci, 0, 1, plan.RS(ci, slotOf(c.Rank, ch.Peer)), plan.L(plan.Input))
		put.Stage = c.stage(len(chs), ci)
		get := c.localCopy(ci, 0, 1, plan.L(plan.Output), plan.LS(ci))
		send := rolling(c.oneWayGroup(1, cat(c.oneWayCredits(one, sem(semFree, 1)), []plan.Op{put}, signals(one, sem(semData, 1))), flushes(one)), ci, sem(semFree, 1))
		recv := rolling(c.oneWayGroup(1, cat(waits(one, sem(semData, 1)), []plan.Op{get}, releases(one, sem(semFree, 1))), flushes(one)), ci, sem(semData, 1))
		send.Arg, recv.Arg = 2*ci+1, 2*ci+2
		groups = append(groups, send, recv)
	}
	groups = append(groups, plan.Group{Blocks: 1, Arg: 2*len(chs) + 1,
		Ops: []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.L(plan.Input))}})
	return c.oneWayPlan("sendrecv", 1, len(chs)+c.stageSlots(len(chs)), 2, groups...)
}

// PortPlanRoot is PortPlan with the root of Broadcast and Reduce: every
// collective has a port-channel plan (nil for one rank).
func PortPlanRoot(c Config, coll Collective, root int) (*plan.Plan, error) {
	if c.NRanks < 2 {
		return nil, nil
	}
	switch coll {
	case Broadcast:
		return BroadcastPort(c, root)
	case Reduce:
		return ReducePort(c, root)
	}
	return PortPlan(c, coll)
}
