package vmtest

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
)

// TestRebootWanted: which images get the reboot pair, and how
// PACKET_STEERING_OPENWRT_ONLY and _CHECKS select it.
func TestRebootWanted(t *testing.T) {
	x86 := owArch{pkgArch: "x86_64"}
	arm := owArch{pkgArch: "aarch64_generic"}
	img23 := owImage{name: "23.05-SNAPSHOT-x86_64", release: "23.05-SNAPSHOT", arch: x86}
	img22 := owImage{name: "22.03.4-x86_64", release: "22.03.4", arch: x86}
	arm23 := owImage{name: "23.05.5-aarch64_generic", release: "23.05.5", arch: arm}
	tests := []struct {
		name         string
		img          owImage
		only, checks string
		want         bool
	}{
		{"23.05 x86_64, everything", img23, "", "", true},
		{"22.03 has no stock service to keep", img22, "", "", false},
		{"aarch64 not booted twice", arm23, "", "", false},
		{"the image named", img23, "22.03.4-x86_64,23.05-SNAPSHOT-x86_64", "", true},
		{"the pair alone", img23, "23.05-SNAPSHOT-x86_64-reboot", "", true},
		{"another image named", img23, "22.03.4-x86_64", "", false},
		{"a prefix is not a name", img23, "23.05-SNAPSHOT-x86_6", "", false},
		{"checks without reboot", img23, "", "luci-toggle-off logread", false},
		{"checks with reboot", img23, "", "logread reboot", true},
		{"checks: reboot-x is not reboot", img23, "", "reboot-x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rebootWanted(tt.img, tt.only, tt.checks); got != tt.want {
				t.Errorf("rebootWanted(%s, %q, %q) = %v, want %v", tt.img.name, tt.only, tt.checks, got, tt.want)
			}
		})
	}
}

// TestRebootVerdict: what makes a boot of the pair fail, from its console.
func TestRebootVerdict(t *testing.T) {
	pass := func(names []string) string {
		var b strings.Builder
		b.WriteString("[    1.0] kernel noise\nPSCHECK EXPECT " + strings.Join(names, " ") + "\n")
		for _, n := range names {
			b.WriteString("PSCHECK PASS " + n + "\r\nPSCHECK TIME " + n + " 1.0s\n")
		}
		b.WriteString("PSCHECK DONE\n")
		return b.String()
	}
	boot1 := pass(rebootWant(1, true))
	boot2 := pass(rebootWant(2, true))
	tests := []struct {
		name  string
		out   string
		boot  int
		stock bool
		want  []string
	}{
		{"boot 1 rebooted", boot1 + "[  99.0] reboot: Restarting system\n", 1, true, nil},
		{"boot 1 powered off instead", boot1 + "[  99.0] reboot: Power down\n", 1, true,
			[]string{`boot 1 did not end in a reboot (no "reboot: Restarting system")`}},
		{"boot 2 powered off", boot2 + "reboot: Power down\n", 2, true, nil},
		{"boot 2 rebooted instead", boot2 + "reboot: Restarting system\n", 2, true,
			[]string{`boot 2 did not power off (no "reboot: Power down")`}},
		{"no stock service: its check not wanted", pass(rebootWant(2, false)) + "reboot: Power down\n", 2, false, nil},
		{"a failed check", strings.Replace(boot2, "PASS knobs-kept", "FAIL knobs-kept: knobs not as before the reboot", 1) + "reboot: Power down\n", 2, true,
			[]string{"FAIL knobs-kept: knobs not as before the reboot"}},
		{"the script died early: missing checks, not done", "PSCHECK EXPECT services-2\nPSCHECK PASS services-2\nreboot: Power down\n", 2, true,
			[]string{"check settings-kept did not report", "check started-at-boot did not report", "check applied-at-boot did not report",
				"check in-sync did not report", "check knobs-kept did not report", "check takeover-kept did not report",
				"the check script did not finish"}},
		{"the guest never ran the script", "[ 0.1] Linux version 6.1\nshim: cannot mount /dev/vda\nreboot: Power down\n", 1, false,
			[]string{"check services-1 did not report", "check install-1 did not report", "check set_mode-1 did not report",
				"check uci-flows-1 did not report", "check knobs-noted-1 did not report",
				"the check script did not finish", `boot 1 did not end in a reboot (no "reboot: Restarting system")`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rebootVerdict(tt.out, tt.boot, tt.stock); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("rebootVerdict = %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestRebootScripts runs shellcheck on the pair's guest scripts.
func TestRebootScripts(t *testing.T) {
	testenv.NeedTool(t, "shellcheck")
	for _, f := range []string{"openwrt/check-reboot.sh", "openwrt/shim-init.sh"} {
		if out, err := exec.Command("shellcheck", "-s", "sh", f).CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v\n%s", f, err, out)
		}
	}
}
