package plan

import (
	"fmt"
	"strings"

	"github.com/packet-steering/packet-steering/platform"
)

// HintNetlinkDisagrees: the kernel's netdev netlink map of queues, NAPI
// instances, threads and IRQs says otherwise than the inference from
// names and id order (platform/netlink.go). The plan follows netlink;
// the hint says where the inference would have gone wrong, which matters
// on the kernels without the map, where only the inference is left.
const HintNetlinkDisagrees = "netlink-disagrees"

// maxNetlinkHintItems bounds how many disagreements the hint spells out.
const maxNetlinkHintItems = 8

// netlinkHints is at most one hint listing the disagreements.
func netlinkHints(s *platform.Snapshot) []Hint {
	if s.Netlink == nil || len(s.Netlink.Disagreements) == 0 {
		return nil
	}
	d := s.Netlink.Disagreements
	more := ""
	if len(d) > maxNetlinkHintItems {
		more = fmt.Sprintf("; and %d more", len(d)-maxNetlinkHintItems)
		d = d[:maxNetlinkHintItems]
	}
	return []Hint{{ID: HintNetlinkDisagrees,
		Text: "The kernel's netlink map of queues, NAPI threads and IRQs differs from what their names and id order suggest; steering follows the kernel: " +
			strings.Join(d, "; ") + more + "."}}
}
