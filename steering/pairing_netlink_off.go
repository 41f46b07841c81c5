//go:build nonetlink

package steering

import "github.com/packet-steering/packet-steering/platform"

// pairNetlink in a build with -tags nonetlink, which reads no netlink map
// (platform/netlink.go): every pairing is the inference's, and a paired
// IRQ is known by its name.
func pairNetlink(_ *platform.Device, dp *DevicePairing) {
	for _, qs := range [][]QueuePair{dp.Rx, dp.Tx} {
		for i := range qs {
			if qs[i].IRQ != nil && qs[i].IRQSource == "" {
				qs[i].IRQSource = platform.SourceIRQName
			}
		}
	}
}

// netlinkHints: without a netlink map there is nothing to disagree with.
func netlinkHints(*platform.Snapshot) []Hint { return nil }
