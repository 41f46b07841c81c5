package tune

import (
	"math"
	"reflect"
	"testing"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want summary
	}{
		{"empty", nil, summary{}},
		{"all NaN", []float64{math.NaN()}, summary{}},
		{"one", []float64{5}, summary{Median: 5, Min: 5, Max: 5, N: 1}},
		{"odd unsorted", []float64{9, 1, 5}, summary{Median: 5, Min: 1, Max: 9, N: 3}},
		{"even averages the middle two", []float64{4, 1, 3, 10}, summary{Median: 3.5, Min: 1, Max: 10, N: 4}},
		{"NaN ignored", []float64{2, math.NaN(), 4}, summary{Median: 3, Min: 2, Max: 4, N: 2}},
		{"negative", []float64{-1, -3, -2}, summary{Median: -2, Min: -3, Max: -1, N: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarize(tt.in)
			if got != tt.want {
				t.Errorf("Summarize(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSummarizeDoesNotReorderInput(t *testing.T) {
	in := []float64{3, 1, 2}
	summarize(in)
	if !reflect.DeepEqual(in, []float64{3, 1, 2}) {
		t.Errorf("input reordered: %v", in)
	}
}

func TestSpreadAndOverlap(t *testing.T) {
	a := summarize([]float64{10, 12, 14})
	if a.Spread() != 4 {
		t.Errorf("spread = %v, want 4", a.Spread())
	}
	tests := []struct {
		name string
		a, b summary
		want bool
	}{
		{"disjoint", summarize([]float64{1, 2}), summarize([]float64{3, 4}), false},
		{"touching ends", summarize([]float64{1, 2}), summarize([]float64{2, 4}), true},
		{"nested", summarize([]float64{1, 9}), summarize([]float64{4, 5}), true},
		{"partial", summarize([]float64{1, 5}), summarize([]float64{4, 8}), true},
		{"unmeasured", summary{}, summarize([]float64{1}), false},
		{"single runs equal", summarize([]float64{3}), summarize([]float64{3}), true},
		{"single runs differ", summarize([]float64{3}), summarize([]float64{3.1}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Overlaps(tt.b); got != tt.want {
				t.Errorf("%+v overlaps %+v = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := tt.b.Overlaps(tt.a); got != tt.want {
				t.Errorf("not symmetric: %+v overlaps %+v = %v", tt.b, tt.a, got)
			}
		})
	}
}

func TestRank(t *testing.T) {
	s := func(xs ...float64) summary { return summarize(xs) }
	tests := []struct {
		name string
		in   []summary
		dir  direction
		want ranking
	}{
		{"none measured", []summary{{}, {}}, higherIsBetter, ranking{Best: -1}},
		{"clear win", []summary{s(380, 387, 390), s(570, 574, 580), s(320, 330)}, higherIsBetter,
			ranking{Best: 1, Order: []int{1, 0, 2}}},
		{"tie inside spread", []summary{s(930, 941, 942), s(900, 935, 940), s(500, 510)}, higherIsBetter,
			ranking{Best: 0, Tied: []int{1}, Order: []int{0, 1, 2}}},
		{"lower is better (loss)", []summary{s(28, 40, 49), s(0.35, 1, 1.61), s(0.14, 5, 17.5)}, lowerIsBetter,
			ranking{Best: 1, Tied: []int{2}, Order: []int{1, 2, 0}}},
		{"unmeasured skipped", []summary{{}, s(1, 2)}, higherIsBetter, ranking{Best: 1, Order: []int{1}}},
		{"equal medians keep input order", []summary{s(5), s(5)}, higherIsBetter,
			ranking{Best: 0, Tied: []int{1}, Order: []int{0, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rank(tt.in, tt.dir)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Rank = %+v, want %+v", got, tt.want)
			}
		})
	}
}
