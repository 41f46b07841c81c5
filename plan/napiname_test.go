package plan

import (
	"regexp"
	"testing"
)

// The hand-written matcher must agree with the stock script's pattern, which
// is what the regexp below spells.
var stockNAPIPattern = regexp.MustCompile(`napi/([^-]*)-(\d+)`)

func checkNAPIName(t *testing.T, name string) {
	t.Helper()
	owner, id, ok := matchNAPIName(name)
	m := stockNAPIPattern.FindStringSubmatch(name)
	if (m != nil) != ok || (ok && (m[1] != owner || m[2] != id)) {
		t.Errorf("matchNAPIName(%q) = %q, %q, %v; regexp gives %q", name, owner, id, ok, m)
	}
}

func TestMatchNAPIName(t *testing.T) {
	for _, name := range []string{
		"napi/eth0-257", "napi/mtk_eth-3", "napi/phy0-12", "napi/eth0-", "napi/eth0-x1",
		"napi/-5", "napi/", "napi", "", "xnapi/eth0-1y", "napi/a-b-1", "napi/napi/eth1-7",
		"napi/br-lan-3", "napi/eth0-x napi/eth1-2", "napi/lan1-0042", "napi/eth0-99999999999999999999",
		"napi/é-1", "napi/eth0-1-2",
	} {
		checkNAPIName(t, name)
	}
}

func FuzzMatchNAPIName(f *testing.F) {
	for _, s := range []string{"napi/eth0-257", "napi/a-b-1", "napi/napi/x-1", "napi/-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) { checkNAPIName(t, name) })
}

func TestIsMTKEthThread(t *testing.T) {
	for name, want := range map[string]bool{"napi/mtk_eth-1": true, "napi/mtk_eth0-1": false, "xnapi/mtk_eth-": true, "napi/eth0-1": false} {
		if got := isMTKEthThread(name); got != want {
			t.Errorf("isMTKEthThread(%q) = %v", name, got)
		}
	}
}
