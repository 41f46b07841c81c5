//go:build nonetlink

package platform

import "context"

// A build with -tags nonetlink asks no netlink (netlink.go): its snapshots
// say so, and the inference from sysfs and procfs stands.

// netlinkNotBuilt is the status its snapshots carry.
const netlinkNotBuilt = "unavailable: not in this build (-tags nonetlink)"

// netlinkData is only the status in this build.
type netlinkData struct{ status string }

// kernelNetlinkSource is the netlink source of a Read of "/".
func kernelNetlinkSource() netlinkSource {
	return func(context.Context, bool) *netlinkData { return &netlinkData{status: netlinkNotBuilt} }
}

// applyNetlink records the status.
func applyNetlink(s *Snapshot, d *netlinkData, _ *gaps) {
	if d != nil {
		s.Netlink = &NetlinkInfo{Status: d.status}
	}
}
