package netnstest

import (
	"net"
	"os"
	"strings"
	"testing"
)

// TestVethThreaded creates a threaded 4-queue veth pair and checks the
// kernel's view from the host (NAPI thread count) and from inside (sysfs).
func TestVethThreaded(t *testing.T) {
	if IsChild(t) {
		// Inside the namespace: /sys shows our veths, not the host's devices.
		for _, dev := range []string{"pa0", "pa1"} {
			b, err := os.ReadFile("/sys/class/net/" + dev + "/threaded")
			if err != nil {
				t.Fatalf("threaded of %s: %v", dev, err)
			}
			if strings.TrimSpace(string(b)) != "1" {
				t.Errorf("%s threaded = %q, want 1", dev, b)
			}
			ents, err := os.ReadDir("/sys/class/net/" + dev + "/queues")
			if err != nil {
				t.Fatalf("queues of %s: %v", dev, err)
			}
			if len(ents) != 8 {
				t.Errorf("%s has %d queue dirs, want 8", dev, len(ents))
			}
		}
		if os.Getenv("NETNSTEST_X") != "y" {
			t.Errorf("env not passed to child")
		}
		return
	}
	ns := New(t, "nt")
	ns.AddVeth(t, Veth{Name: "pa0", Peer: "pa1", Queues: 4, Threaded: true,
		Addr: "198.18.7.1/30", PeerAddr: "198.18.7.2/30"})
	for _, dev := range []string{"pa0", "pa1"} {
		pids, err := NAPIThreads(dev, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) != 4 {
			t.Errorf("%s: %d NAPI threads %v, want 4", dev, len(pids), pids)
		}
	}
	ns.RunChild(t, map[string]string{"NETNSTEST_X": "y"})
}

// TestDoSwitchesNetns checks that Do runs in the namespace (only lo and the
// veths are visible) and that the caller's namespace is untouched.
func TestDoSwitchesNetns(t *testing.T) {
	a := New(t, "nt")
	b := New(t, "nt")
	a.AddVeth(t, Veth{Name: "pb0", Peer: "pb1", PeerNS: b})
	var names []string
	err := a.Do(func() error {
		ifs, err := net.Interfaces()
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "lo,pb0" {
		t.Errorf("interfaces in %s = %v, want lo,pb0", a.Name, names)
	}
	if _, err := net.InterfaceByName("pb0"); err == nil {
		t.Errorf("pb0 visible outside the namespace")
	}
	out := b.MustExec(t, "ip", "-o", "link", "show", "pb1")
	if !strings.Contains(out, "pb1") {
		t.Errorf("peer not in second namespace: %s", out)
	}
}

func TestNamesValidated(t *testing.T) {
	ns := &NS{Name: "unused"}
	for _, bad := range []string{"", "a/b", "x y", "way-too-long-name0", "$(x)"} {
		if err := ns.addVeth(Veth{Name: bad, Peer: "ok"}); err == nil {
			t.Errorf("addVeth(%q) accepted", bad)
		}
		if err := ns.SetThreaded(bad, true); err == nil {
			t.Errorf("SetThreaded(%q) accepted", bad)
		}
	}
}
