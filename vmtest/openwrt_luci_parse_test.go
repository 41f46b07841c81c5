package vmtest

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLuciResult: what the router is served after the browser run. A run
// that failed reports every check it did not report as failed, with the
// reason, so the router's PSCHECK lines name each one.
func TestLuciResult(t *testing.T) {
	for _, tt := range []struct {
		name  string
		phase string
		lines []string
		err   error
		want  []string
		never []string
	}{
		{
			name:  "all reported",
			lines: []string{"PASS luci-login", "TIME luci-login 3.0s", "PASS luci-queues", "FAIL luci-save-apply: no change", "PASS luci-readonly"},
			want:  []string{"PASS luci-login\n", "FAIL luci-save-apply: no change\n", "TIME luci-browser 2.0s\n"},
			never: []string{"browser run"},
		},
		{
			name:  "died after the login",
			lines: []string{"PASS luci-login"},
			err:   errors.New("node openwrt.mjs: exit status 1"),
			want: []string{"PASS luci-login\n", "FAIL luci-queues: browser run: node openwrt.mjs: exit status 1\n",
				"FAIL luci-save-apply: browser run:", "FAIL luci-readonly: browser run:"},
			never: []string{"FAIL luci-login"},
		},
		{
			name: "never started",
			err:  errors.New("playwright-core is missing:\nscripts/deps.sh test installs it"),
			want: []string{"FAIL luci-login: browser run: playwright-core is missing: scripts/deps.sh test installs it\n"},
		},
		{
			name:  "a failed check still reported",
			lines: []string{"FAIL luci-login: HTTP 500"},
			err:   errors.New("exit status 1"),
			want:  []string{"FAIL luci-login: HTTP 500\n", "FAIL luci-readonly: browser run: exit status 1\n"},
			never: []string{"FAIL luci-login: browser run"},
		},
		{
			name:  "the graph phase died",
			phase: "graph",
			err:   errors.New("exit status 1"),
			want:  []string{"FAIL mon-graph-page: browser run: exit status 1\n", "TIME graph-browser 2.0s\n"},
			never: []string{"luci-login", "luci-browser"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			phase := tt.phase
			if phase == "" {
				phase = "luci"
			}
			got := string(luciResult(phase, browserPhases[phase], tt.lines, tt.err, 2*time.Second))
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("no %q in:\n%s", w, got)
				}
			}
			for _, n := range tt.never {
				if strings.Contains(got, n) {
					t.Errorf("%q in:\n%s", n, got)
				}
			}
		})
	}
}

// TestLuciChecksAgree: the host's lists of browser checks are check-luci.sh's
// LUCI_BROWSER, check-monitoring.sh's graph run and openwrt.mjs's check names, so a check added to one and
// not the others fails here rather than as a missing report in a boot.
func TestLuciChecksAgree(t *testing.T) {
	want := strings.Join(luciBrowserChecks, " ")
	if !strings.Contains(string(luciScript), `LUCI_BROWSER="`+want+`"`) {
		t.Errorf("check-luci.sh's LUCI_BROWSER is not %q", want)
	}
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(repo + "/luci-app-packet-steering/test/openwrt.mjs")
	if err != nil {
		t.Fatal(err)
	}
	for phase, checks := range browserPhases {
		for _, n := range checks {
			if !strings.Contains(string(js), "await check('"+n+"'") {
				t.Errorf("openwrt.mjs has no check %s (phase %s)", n, phase)
			}
		}
	}
	mon, err := os.ReadFile(repo + "/vmtest/openwrt/check-monitoring.sh")
	if err != nil {
		t.Fatal(err)
	}
	if want := "browser_run graph " + strings.Join(browserPhases["graph"], " "); !strings.Contains(string(mon), want) {
		t.Errorf("check-monitoring.sh does not run %q", want)
	}
}
