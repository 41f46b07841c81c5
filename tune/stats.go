package tune

import (
	"math"
	"sort"
)

// summary is a metric over the runs of one candidate: its median and the
// run-to-run spread as min and max. N is the number of runs it is made of;
// a zero summary (N 0) means the metric was not measured.
type summary struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// summarize returns the median, min and max of xs. NaN values are ignored;
// an empty input (or all NaN) gives a zero Summary.
func summarize(xs []float64) summary {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return summary{}
	}
	// sort.Slice, not sort.Float64s (slices.Sort): the generic sort for
	// float64 costs the router binary about 3.5 KB; NaNs are gone.
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return summary{Median: med, Min: v[0], Max: v[n-1], N: n}
}

// Spread is Max-Min, the run-to-run variation.
func (s summary) Spread() float64 { return s.Max - s.Min }

// Overlaps reports whether the min-max ranges of s and o share a value.
// Two candidates whose ranges overlap on a metric are a tie on it: the
// difference of their medians is inside the run-to-run spread.
func (s summary) Overlaps(o summary) bool {
	if s.N == 0 || o.N == 0 {
		return false
	}
	return s.Min <= o.Max && o.Min <= s.Max
}

// direction says which way a metric improves.
type direction int

// Directions.
const (
	higherIsBetter direction = iota + 1
	lowerIsBetter
)

// better reports whether median a beats median b in direction d.
func (d direction) better(a, b float64) bool {
	if d == lowerIsBetter {
		return a < b
	}
	return a > b
}

// ranking is the outcome of comparing candidates on one metric.
type ranking struct {
	// Best is the index of the candidate with the best median; -1 when no
	// candidate has the metric.
	Best int `json:"best"`
	// Tied lists the other candidates whose min-max range overlaps the
	// best's: their difference from the best is not a win.
	Tied []int `json:"tied,omitempty"`
	// Order lists every measured candidate, best median first.
	Order []int `json:"order"`
}

// rank orders candidates by the median of their summaries in direction d
// and finds the ties of the best. Candidates with N 0 are left out. Equal
// medians keep their input order, so the earlier candidate wins.
func rank(s []summary, d direction) ranking {
	r := ranking{Best: -1}
	for i := range s {
		if s[i].N > 0 {
			r.Order = append(r.Order, i)
		}
	}
	sort.SliceStable(r.Order, func(a, b int) bool {
		return d.better(s[r.Order[a]].Median, s[r.Order[b]].Median)
	})
	if len(r.Order) == 0 {
		return r
	}
	r.Best = r.Order[0]
	for _, i := range r.Order[1:] {
		if s[i].Overlaps(s[r.Best]) {
			r.Tied = append(r.Tied, i)
		}
	}
	return r
}
