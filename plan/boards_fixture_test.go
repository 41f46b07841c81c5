package plan

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/platform"
)

// The expected plans of the boards presets (platform/fixture
// boards_presets.go) in every mode, in testdata/board_presets.txt:
//
//	== PRESET MODE POLICY [HINT...]
//	kind target value
//	...
//
// The off, legacy and all plans there are the stock script's: they were
// compared with what OpenWrt's packet-steering.uc itself writes on each
// preset's fixture root (scripts/stock-compare.sh, every preset the same,
// docs/platforms.md "Boards"). The auto plans are the board rules' results,
// each checked against the rule it shows (the rule tests in
// rule_*_test.go pin the parts that matter). After a deliberate change,
// PACKET_STEERING_UPDATE_BOARDS=1 go test -run TestBoardPresetsGolden
// rewrites the file; the diff is the review.

const boardPresetsFile = "testdata/board_presets.txt"

// boardPresetNames are the presets the file covers.
var boardPresetNames = []string{"bpi-r4", "ipq50xx", "ipq60xx", "ipq806x", "lantiq", "mt3000", "mt6000",
	"r2s", "r4s", "r5s", "r6s", "r6s-skew", "rpi4", "rpi5"}

// boardPresetCases reads the file into presetCases; a missing or broken
// file gives none, which TestPresetPlans reports per preset.
func boardPresetCases() map[string]presetCase {
	f, err := os.Open(boardPresetsFile)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]presetCase{}
	var cur *presetCase
	var mode Mode
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "== "); ok {
			fields := strings.Fields(rest)
			if len(fields) < 3 {
				return nil
			}
			c, ok := out[fields[0]]
			if !ok {
				c = presetCase{policy: map[Mode]string{}, want: map[Mode][]string{}, hints: map[Mode][]string{}}
			}
			out[fields[0]] = c
			cur, mode = &c, Mode(fields[1])
			cur.policy[mode] = fields[2]
			cur.hints[mode] = fields[3:]
			cur.want[mode] = nil
			continue
		}
		if cur != nil && line != "" {
			cur.want[mode] = append(cur.want[mode], line)
		}
	}
	if sc.Err() != nil {
		return nil
	}
	return out
}

// TestBoardPresetsGolden rewrites the file when asked, and checks that it
// covers every boards preset in every mode.
func TestBoardPresetsGolden(t *testing.T) {
	modes := []Mode{ModeOff, ModeLegacy, ModeAll, ModeAuto, ModeCustom}
	if os.Getenv("PACKET_STEERING_UPDATE_BOARDS") == "1" {
		var b strings.Builder
		for _, name := range boardPresetNames {
			s := presetSnapshot(t, name)
			for _, m := range modes {
				p, err := NewPlan(s, PlanRequest{Mode: m})
				if err != nil {
					t.Fatal(err)
				}
				ids := hintIDs(p)
				sort.Strings(ids)
				fmt.Fprintf(&b, "== %s %s %s %s\n", name, m, p.Policy, strings.Join(ids, " "))
				for _, l := range render(p.Actions) {
					b.WriteString(l + "\n")
				}
			}
		}
		if err := os.WriteFile(boardPresetsFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := boardPresetCases()
	for _, name := range boardPresetNames {
		c, ok := cases[name]
		if !ok {
			t.Errorf("%s: not in %s", name, boardPresetsFile)
			continue
		}
		for _, m := range modes {
			if c.policy[m] == "" {
				t.Errorf("%s %s: no expected plan", name, m)
			}
		}
	}
}

// Applying a boards preset's plan and planning again changes nothing: the
// board rules reach a fixed point (an IRQ they pinned to a big core stays
// there, RPS stays off it).
func TestBoardPresetPlansIdempotent(t *testing.T) {
	for _, name := range boardPresetNames {
		s := presetSnapshot(t, name)
		for _, mode := range []Mode{ModeLegacy, ModeAuto} {
			p := mustPlan(t, s, mode, 8)
			applied := applyToSnapshot(s, p)
			applied.Workers = append([]platform.NAPIThread(nil), s.Workers...)
			for _, a := range p.Actions {
				for i := range applied.Workers {
					if a.Kind == KindNAPIAffinity && applied.Workers[i].PID == a.PID {
						applied.Workers[i].CPUs = a.Value
					}
				}
			}
			again := mustPlan(t, applied, mode, 8)
			for _, a := range again.Actions {
				if !a.Holds() {
					t.Errorf("%s %s: %s %s does not hold after apply (%q want %q)", name, mode, a.Kind, a.Target(), a.Current, a.Value)
				}
			}
		}
	}
}
