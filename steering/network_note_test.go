package steering

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
)

// TestSetModeNotesNetworkWritten: a persisted set_mode leaves in
// NetworkSeenFile exactly the network-page values it wrote
// (network.@globals[0].packet_steering "/" steering_flows, what stock.sh's
// ps_network_values prints), so that the init script's next network reload
// does not take set_mode's own write for a change on LuCI's page and undo
// the packet_steering options set since. A set_mode without persist writes
// neither the network file nor the note.
func TestSetModeNotesNetworkWritten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		before  string // the note before set_mode; "" none, "dir" an empty directory in its place
		mode    plan.Mode
		flows   int
		persist bool
		want    string // the note after; "" none
	}{
		{"no note yet", "", plan.ModeAll, 0, true, "2/0\n"},
		{"the init script's note from start", "1/\n", plan.ModeAll, 0, true, "2/0\n"},
		{"off with flows", "1/\n", plan.ModeOff, 256, true, "0/256\n"},
		{"auto", "0/0\n", plan.ModeAuto, 128, true, "1/128\n"},
		{"not persisted: note kept", "1/\n", plan.ModeAll, 0, false, "1/\n"},
		{"note cannot be written: no stale note left", "dir", plan.ModeAll, 0, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := configRoot(t, map[string]string{"network": networkConfig})
			note := filepath.Join(root, NetworkSeenFile)
			if err := os.MkdirAll(filepath.Dir(note), 0o755); err != nil {
				t.Fatal(err)
			}
			switch tc.before {
			case "":
			case "dir":
				if err := os.Mkdir(note, 0o755); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.WriteFile(note, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := NewEngine(root).SetMode(context.Background(), SetModeRequest{Mode: tc.mode, Flows: intp(tc.flows), Persist: tc.persist}); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(note)
			if tc.want == "" {
				if _, serr := os.Stat(note); !os.IsNotExist(serr) {
					t.Fatalf("note left behind: %v", serr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("note %q, want %q", b, tc.want)
			}
			if !tc.persist {
				return
			}
			// The note is what the network file now says.
			g := loadUCI(t, root, "network").SectionsOfType("globals")
			if len(g) != 1 {
				t.Fatalf("%d globals sections in network", len(g))
			}
			v, _ := g[0].Get("packet_steering")
			f, _ := g[0].Get("steering_flows")
			if got := v + "/" + f + "\n"; got != string(b) {
				t.Errorf("network file says %q, the note %q", got, b)
			}
		})
	}
}
