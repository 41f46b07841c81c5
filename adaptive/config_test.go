package adaptive

import (
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

func TestResolveAdaptiveConfig(t *testing.T) {
	def := DefaultConfig()
	tests := []struct {
		name string
		raw  map[string]string // nil: no section
		// want changes the defaults into the wanted config.
		want func(c *Config)
		// set are the options whose source is packet_steering.
		set []string
		// problems are substrings, one per problem, in order.
		problems []string
	}{
		{name: "no section"},
		{name: "empty section", raw: map[string]string{}},
		{
			name: "every kind of value",
			raw: map[string]string{"interval": "1", "max_idle_interval": "500ms", "dwell": " 1m ", "high_load": "70%", "low_load": "30",
				"busy_load": "0", "margin": "5.5", "squeeze_rate": "0", "idle_pps": "100", "hot_intervals": "3", "max_moves": "4"},
			// max_idle_interval 0.5s is below interval 1s: both refused below.
			want: func(c *Config) {
				c.MinDwell, c.HighLoad, c.LowLoad, c.BusyLoad, c.Margin = time.Minute, 0.70, 0.30, 0, 0.055
				c.SqueezeRate, c.IdlePPS, c.HotIntervals, c.MaxMoves = 0, 100, 3, 4
			},
			set:      []string{"dwell", "hot_intervals", "max_moves", "high_load", "low_load", "busy_load", "margin", "squeeze_rate", "idle_pps"},
			problems: []string{"interval must not exceed max_idle_interval, using the default interval and max_idle_interval"},
		},
		{
			name: "short intervals",
			raw:  map[string]string{"interval": "0.2", "max_idle_interval": "1s", "dwell": "0"},
			want: func(c *Config) {
				c.Interval, c.MaxIdleInterval, c.MinDwell = 200*time.Millisecond, time.Second, 0
			},
			set: []string{"interval", "max_idle_interval", "dwell"},
		},
		{
			name: "bad values fall back one by one",
			raw: map[string]string{"interval": "fast", "dwell": "-1", "high_load": "101", "margin": "NaN", "max_moves": "1.5",
				"cool_intervals": "0", "drop_rate": "Inf", "busy_net_load": "40"},
			want: func(c *Config) { c.BusyNet = 0.40 },
			set:  []string{"busy_net_load"},
			problems: []string{
				`interval: "fast" is not 0.1 to 60 seconds (e.g. 2, 0.5 or 500ms), using 2s`,
				`dwell: "-1" is not 0 to 3600 seconds`,
				`cool_intervals: "0" is not a whole number from 1 to 100, using 3`,
				`max_moves: "1.5" is not a whole number from 1 to 64, using 1`,
				`high_load: "101" is not 1 to 100 percent of a CPU (e.g. 85 or 85%), using 85%`,
				`margin: "NaN" is not`,
				`drop_rate: "Inf" is not 0 or more per second, using 1`,
			},
		},
		{
			name:     "low not below high",
			raw:      map[string]string{"low_load": "90"},
			problems: []string{"low_load must be below high_load, using the default low_load"},
		},
		{
			name:     "unknown options and lists",
			raw:      map[string]string{"intervall": "1", "max_moves": "2 3", "zzz": ""},
			problems: []string{`max_moves: "2 3" is not a whole number`, "packet_steering.adaptive.intervall: unknown option, ignored (accepted: interval, ", "zzz: unknown option"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := &platform.Snapshot{}
			if tc.raw != nil {
				snap.Config.Steering = &platform.SteeringConfig{Adaptive: tc.raw}
			}
			got := ResolveConfig(snap)
			want := def
			if tc.want != nil {
				tc.want(&want)
			}
			if got.Config != want {
				t.Errorf("config\n got %+v\nwant %+v", got.Config, want)
			}
			if err := got.Config.Check(); err != nil {
				t.Errorf("resolved config refused: %v", err)
			}
			if len(got.Problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d like %q", got.Problems, len(tc.problems), tc.problems)
			}
			for i, p := range tc.problems {
				if !strings.Contains(got.Problems[i], p) || !strings.HasPrefix(got.Problems[i], "packet_steering.adaptive") {
					t.Errorf("problem %d %q, want it to hold %q", i, got.Problems[i], p)
				}
			}
			if len(got.Options) != 15 {
				t.Errorf("%d options, want all 15", len(got.Options))
			}
			for _, o := range got.Options {
				wantSrc := plan.SourceDefault
				for _, s := range tc.set {
					if s == o.Name {
						wantSrc = plan.SourcePacketSteering
					}
				}
				if o.Source != wantSrc {
					t.Errorf("option %s source %s, want %s", o.Name, o.Source, wantSrc)
				}
			}
		})
	}
	// What status shows reads back as the same configuration.
	st := ResolveConfig(&platform.Snapshot{})
	raw := map[string]string{}
	for _, o := range st.Options {
		raw[o.Name] = o.Value
	}
	back := ResolveConfig(&platform.Snapshot{Config: platform.Config{Steering: &platform.SteeringConfig{Adaptive: raw}}})
	if back.Config != def || len(back.Problems) != 0 {
		t.Errorf("status values do not read back: %+v %q", back.Config, back.Problems)
	}
}
