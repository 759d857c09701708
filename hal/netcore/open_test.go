package netcore

import (
	"testing"

	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/netcore/nettest"
)

func TestCheckOpen(t *testing.T) {
	dev, err := hal.Open("host", hal.Config{JobID: "netcore-open"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pm, secret, err := CheckOpen("test", dev, hal.NetConfig{Rank: 1, NRanks: 2}, 0, "to stage through")
	if err != nil || pm == nil || !secret.IsZero() {
		t.Fatalf("CheckOpen of a host device: %v, %v, secret zero %v", pm, err, secret.IsZero())
	}
	_, _, err = CheckOpen("test", dev, hal.NetConfig{Rank: 2, NRanks: 2}, 0, "")
	nettest.ErrorMentions(t, err, hal.ErrInvalidArgument, "test: rank 2 of 2 ranks")
	_, _, err = CheckOpen("test", dev, hal.NetConfig{Rank: 0, NRanks: 5}, 4, "")
	nettest.ErrorMentions(t, err, hal.ErrInvalidArgument, "test: rank 0 of 5 ranks")
	_, _, err = CheckOpen("test", dev, hal.NetConfig{Rank: 0, NRanks: 2, Secret: []byte{1, 2}}, 0, "")
	nettest.ErrorMentions(t, err, nil, "test: open rank 0: NetConfig.Secret")
	_, _, err = CheckOpen("test", nil, hal.NetConfig{Rank: 0, NRanks: 2}, 0, "")
	nettest.ErrorMentions(t, err, hal.ErrInvalidArgument, "test: open rank 0: nil device")
}

func TestPeerAddress(t *testing.T) {
	self := hal.Endpoint{Backend: "host", HostID: "h", Ordinal: 1, PID: 7}
	peer := self
	peer.Net = map[string][]byte{"test": {1, 2, 3}}
	if raw, own, err := PeerAddress("test", "test", 0, peer, self); err != nil || own || string(raw) != "\x01\x02\x03" {
		t.Errorf("an endpoint with an address: %x, own %v, %v", raw, own, err)
	}
	if raw, own, err := PeerAddress("test", "test", 0, self, self); err != nil || !own || raw != nil {
		t.Errorf("this device's endpoint without an address: %x, own %v, %v", raw, own, err)
	}
	other := self
	other.Ordinal = 2
	_, _, err := PeerAddress("test", "test", 0, other, self)
	nettest.ErrorMentions(t, err, hal.ErrInvalidArgument, "test: rank 0: engine to host device 2", "carries no test address")
}
