package tune

import (
	"reflect"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
)

func names(cs []candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

func TestParseCandidates(t *testing.T) {
	tests := []struct {
		in      string
		want    []candidate
		wantErr string
	}{
		{in: "off;auto", want: []candidate{{Name: "off", Mode: "off"}, {Name: "auto", Mode: "auto"}}},
		{in: "auto adaptive", want: []candidate{{Name: "auto", Mode: "auto"}, {Name: "adaptive", Mode: "adaptive"}}},
		{in: " legacy  all\n", want: []candidate{{Name: "legacy", Mode: "legacy"}, {Name: "all", Mode: "all"}}},
		{in: "eth0:2/br-lan:0", want: []candidate{{Name: "eth0:2/br-lan:0", Mode: "custom",
			RPS: []deviceMask{{"eth0", "2"}, {"br-lan", "0"}}}}},
		{in: "eth0:1,00000000", want: []candidate{{Name: "eth0:1,00000000", Mode: "custom",
			RPS: []deviceMask{{"eth0", "1,00000000"}}}}},
		{in: "", wantErr: "empty"},
		{in: "custom", wantErr: "not a mode"},
		{in: "fast", wantErr: "not a mode"},
		{in: "eth0:", wantErr: "not DEV:MASK"},
		{in: ":2", wantErr: "not DEV:MASK"},
		{in: "eth0:xyz", wantErr: "eth0"},
		{in: "eth0:123456789", wantErr: "eth0"},
		{in: "eth0:2/eth0:1", wantErr: "given twice"},
		{in: "auto;auto", wantErr: "given twice"},
		{in: "averyveryverylongname:1", wantErr: "longer than 15"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseCandidates(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to say %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestVariants(t *testing.T) {
	l := layout{CPUs: []int{0, 1, 2, 3}, RxCPUs: map[string][]int{"eth0": {0}, "all": {0, 1, 2, 3}}}
	tests := []struct {
		dev  string
		want []string
	}{
		{"eth0", []string{"0", "1", "2", "4", "8", "e"}},
		{"br-lan", []string{"0", "1", "2", "4", "8"}}, // rx CPU unknown
		{"all", []string{"0", "1", "2", "4", "8"}},    // pinned to every CPU: no "all but"
	}
	for _, tt := range tests {
		if got := l.Variants(tt.dev); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Variants(%s) = %v, want %v", tt.dev, got, tt.want)
		}
	}
	// Two CPUs, rx on CPU0: "all but the IRQ's" is CPU1, already listed.
	l2 := layout{CPUs: []int{0, 1}, RxCPUs: map[string][]int{"eth0": {0}}}
	if got := l2.Variants("eth0"); !reflect.DeepEqual(got, []string{"0", "1", "2"}) {
		t.Errorf("2-CPU variants = %v", got)
	}
}

func TestGenerate(t *testing.T) {
	two := layout{CPUs: []int{0, 1}, Devices: []string{"eth0", "br-lan"}, RxCPUs: map[string][]int{"eth0": {0}}}
	tests := []struct {
		name        string
		modes       []plan.Mode
		l           layout
		max         int
		want        []string
		wantDropped int
	}{
		{
			name: "the bcm53xx commit's full table fits",
			l:    two, max: 9,
			want: []string{"eth0:0/br-lan:0", "eth0:0/br-lan:1", "eth0:0/br-lan:2", "eth0:1/br-lan:0", "eth0:1/br-lan:1",
				"eth0:1/br-lan:2", "eth0:2/br-lan:0", "eth0:2/br-lan:1", "eth0:2/br-lan:2"},
		},
		{
			name:  "modes first, then one device at a time when the product does not fit",
			modes: sweepModes(), l: two, max: 8,
			want:        []string{"off", "legacy", "all", "auto", "eth0:0", "eth0:1", "eth0:2", "br-lan:0"},
			wantDropped: 2,
		},
		{
			name: "no cap", modes: []plan.Mode{plan.ModeAuto}, l: two, max: 0,
			want: []string{"auto", "eth0:0/br-lan:0", "eth0:0/br-lan:1", "eth0:0/br-lan:2", "eth0:1/br-lan:0", "eth0:1/br-lan:1",
				"eth0:1/br-lan:2", "eth0:2/br-lan:0", "eth0:2/br-lan:1", "eth0:2/br-lan:2"},
		},
		{name: "no devices", modes: sweepModes(), l: layout{CPUs: []int{0, 1}}, max: 10, want: []string{"off", "legacy", "all", "auto"}},
		{name: "cap below the modes", modes: sweepModes(), l: two, max: 2, want: []string{"off", "legacy"}, wantDropped: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := generate(tt.modes, tt.l, tt.max)
			if !reflect.DeepEqual(names(got), tt.want) || dropped != tt.wantDropped {
				t.Errorf("got %v (dropped %d), want %v (dropped %d)", names(got), dropped, tt.want, tt.wantDropped)
			}
		})
	}
}
