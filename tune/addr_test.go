package tune

import (
	"net/netip"
	"testing"
)

// checkAddr: parseAddr accepts what net/netip.ParseAddr accepts (without
// a zone), gives the same address unmapped, and prints it the same way,
// with the same classification.
func checkAddr(t *testing.T, s string) {
	t.Helper()
	a, ok := parseAddr(s)
	want, err := netip.ParseAddr(s)
	if err == nil && want.Zone() != "" {
		if ok {
			t.Errorf("parseAddr(%q) accepted a zone", s)
		}
		return
	}
	if ok != (err == nil) {
		t.Fatalf("parseAddr(%q) ok %v, netip: %v", s, ok, err)
	}
	if !ok {
		return
	}
	want = want.Unmap()
	if a.String() != want.String() {
		t.Errorf("parseAddr(%q) = %s, netip %s", s, a, want)
	}
	if a.v4 != want.Is4() || a.isUnspecified() != want.IsUnspecified() || a.isMulticast() != want.IsMulticast() ||
		a.isLoopback() != want.IsLoopback() || a.isBroadcast() != (want == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		t.Errorf("parseAddr(%q) classes differ from netip's %s", s, want)
	}
}

var addrCases = []string{
	"198.18.0.2", "0.0.0.0", "255.255.255.255", "224.0.0.1", "127.0.0.1", "127.1.2.3", "1.2.3", "1.2.3.4.5", "01.2.3.4",
	"256.1.1.1", "1.2.3.-4", "", ".", "1..2.3", "a.b.c.d", "1.2.3.4 ",
	"::", "::1", "2001:db8::1", "2001:DB8:0:0:0:0:0:1", "2001:db8:0:0:1:0:0:1", "::ffff:198.18.0.3", "::ffff:c612:3",
	"::1.2.3.4", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::8", "1:2:3:4:5:6::7:8", "1::", ":1", "1:", ":::", "1::2::3",
	"12345::1", "g::1", "fe80::1%eth0", "ff02::1", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "1.2.3.4::",
	"0:0:0:0:0:0:0:0", "0:0:1:0:0:0:1:0", "1:0:0:2:0:0:0:3", "::ffff:0.0.0.0", "0000:0000::0001",
}

func TestParseAddrMatchesNetip(t *testing.T) {
	for _, s := range addrCases {
		checkAddr(t, s)
	}
}

func FuzzParseAddr(f *testing.F) {
	for _, s := range addrCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkAddr(t, s) })
}
