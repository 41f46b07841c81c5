package vmtest

import (
	"reflect"
	"testing"
)

// TestParseChecks: the console lines check.sh prints, among the kernel's
// and with carriage returns, give the passed, failed and missing checks.
func TestParseChecks(t *testing.T) {
	tests := []struct {
		name        string
		out         string
		wantPassed  []string
		wantFailed  []string
		wantMissing []string
		wantDone    bool
	}{
		{
			name: "all passed",
			out: "PSCHECK EXPECT a b\r\n[   1.0] kernel line\nPSCHECK PASS a\nPSCHECK TIME a 1.0s\n" +
				"PSCHECK PASS b\nPSCHECK DONE\n",
			wantPassed: []string{"a", "b"}, wantDone: true,
		},
		{
			name:       "a failure with its reason, a check that never reported, no DONE",
			out:        "PSCHECK EXPECT a b c\nPSCHECK PASS a\npscheck| b: detail\nPSCHECK FAIL b: not in sync\n",
			wantPassed: []string{"a"}, wantFailed: []string{"b: not in sync"}, wantMissing: []string{"c"},
		},
		{
			name:        "a line the kernel interrupted still counts after the marker",
			out:         "PSCHECK EXPECT x y\n[  2.0] br-lan: port 1PSCHECK PASS x\nPSCHECK DONE\n",
			wantPassed:  []string{"x"},
			wantMissing: []string{"y"}, wantDone: true,
		},
		{
			name:        "nothing announced: nothing is missing, but not done",
			out:         "boot messages only\n",
			wantMissing: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseChecks(tt.out)
			var passed []string
			for _, e := range r.expected {
				if r.passed[e] {
					passed = append(passed, e)
				}
			}
			if !reflect.DeepEqual(passed, tt.wantPassed) {
				t.Errorf("passed %v, want %v", passed, tt.wantPassed)
			}
			if !reflect.DeepEqual(r.failed, tt.wantFailed) {
				t.Errorf("failed %v, want %v", r.failed, tt.wantFailed)
			}
			if got := r.missing(); !reflect.DeepEqual(got, tt.wantMissing) {
				t.Errorf("missing %v, want %v", got, tt.wantMissing)
			}
			if r.done != tt.wantDone {
				t.Errorf("done %v, want %v", r.done, tt.wantDone)
			}
		})
	}
}

// TestReleaseField reads /etc/openwrt_release values, quoted or not.
func TestReleaseField(t *testing.T) {
	b := []byte("DISTRIB_ID='OpenWrt'\nDISTRIB_RELEASE='23.05.5'\nDISTRIB_ARCH=\"aarch64_generic\"\nDISTRIB_X=plain\n")
	for key, want := range map[string]string{
		"DISTRIB_RELEASE": "23.05.5", "DISTRIB_ARCH": "aarch64_generic", "DISTRIB_X": "plain", "DISTRIB_NONE": "",
	} {
		if got := releaseField(b, key); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
}
