package plan

import (
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/platform"
)

func TestNetlinkHints(t *testing.T) {
	s := &platform.Snapshot{}
	if h := netlinkHints(s); h != nil {
		t.Fatalf("no netlink: %v", h)
	}
	s.Netlink = &platform.NetlinkInfo{Status: "ok"}
	if h := netlinkHints(s); h != nil {
		t.Fatalf("agreeing netlink: %v", h)
	}
	for i := 0; i < 10; i++ {
		s.Netlink.Disagreements = append(s.Netlink.Disagreements, "eth0 rx-"+string(rune('0'+i))+": differs")
	}
	h := netlinkHints(s)
	if len(h) != 1 || h[0].ID != HintNetlinkDisagrees || !strings.Contains(h[0].Text, "eth0 rx-7: differs; and 2 more.") ||
		strings.Contains(h[0].Text, "rx-8") {
		t.Fatalf("hint %+v", h)
	}
}
