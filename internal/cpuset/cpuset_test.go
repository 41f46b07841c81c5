package cpuset

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseMask(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		err  bool
	}{
		{in: "0", want: nil},
		{in: "1", want: []int{0}},
		{in: "f", want: []int{0, 1, 2, 3}},
		{in: "F", want: []int{0, 1, 2, 3}},
		{in: "e", want: []int{1, 2, 3}},
		{in: "00", want: nil},
		{in: "01", want: []int{0}},
		{in: "f\n", want: []int{0, 1, 2, 3}},
		{in: "1,00000000", want: []int{32}},
		{in: "0000,00000001", want: []int{0}},
		{in: "ffffffff", want: rangeInts(0, 31)},
		{in: "1,ffffffff", want: rangeInts(0, 32)},
		{in: "1,,5", want: []int{0, 2, 32}}, // runs of separators are one (kernel)
		{in: " 3 ", want: []int{0, 1}},
		{in: "80000000,00000000,00000000", want: []int{95}},
		{in: "", err: true},
		{in: ",", err: true},
		{in: "\n", err: true},
		{in: "100000000", err: true}, // 9 digits in a group: EOVERFLOW in the kernel
		{in: "1,100000000", err: true},
		{in: "0x1", err: true},
		{in: "g", err: true},
		{in: "-1", err: true},
		{in: "1;2", err: true},
	}
	for _, tt := range tests {
		got, err := ParseMask(tt.in)
		if tt.err {
			if err == nil {
				t.Errorf("ParseMask(%q) = %v, want error", tt.in, got.CPUs())
			} else if !errors.Is(err, errMask) {
				t.Errorf("ParseMask(%q) error %v does not wrap errMask", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseMask(%q): %v", tt.in, err)
			continue
		}
		if !got.Equal(Of(tt.want...)) {
			t.Errorf("ParseMask(%q) = %v, want %v", tt.in, got.CPUs(), tt.want)
		}
	}
}

func TestParseMaskBounds(t *testing.T) {
	// 256 groups of 32 bits = MaxCPUs: the top CPU is accepted...
	top := "80000000" + strings.Repeat(",00000000", MaxCPUs/32-1)
	s, err := ParseMask(top)
	if err != nil || s.Max() != MaxCPUs-1 {
		t.Fatalf("ParseMask(top CPU) = %v, %v", s.Max(), err)
	}
	// ...one more group is not.
	if _, err := ParseMask("1," + strings.Repeat("00000000,", MaxCPUs/32-1) + "00000000"); err == nil {
		t.Fatal("mask above MaxCPUs accepted")
	}
}

func TestMaskFormat(t *testing.T) {
	tests := []struct {
		cpus []int
		mask string
		list string
	}{
		{nil, "0", ""},
		{[]int{0}, "1", "0"},
		{[]int{1}, "2", "1"},
		{[]int{1, 2, 3}, "e", "1-3"},
		{[]int{0, 1, 2, 3}, "f", "0-3"},
		{[]int{0, 2, 3, 5}, "2d", "0,2-3,5"},
		{[]int{0, 1}, "3", "0-1"},
		{[]int{31}, "80000000", "31"},
		{[]int{32}, "1,00000000", "32"},
		{[]int{0, 32}, "1,00000001", "0,32"},
		{[]int{40, 47}, "8100,00000000", "40,47"},
		{[]int{64}, "1,00000000,00000000", "64"},
		{rangeInts(0, 47), "ffff,ffffffff", "0-47"},
	}
	for _, tt := range tests {
		s := Of(tt.cpus...)
		if got := s.Mask(); got != tt.mask {
			t.Errorf("%v.Mask() = %q, want %q", tt.cpus, got, tt.mask)
		}
		if got := s.List(); got != tt.list {
			t.Errorf("%v.List() = %q, want %q", tt.cpus, got, tt.list)
		}
	}
}

func TestKernelMask(t *testing.T) {
	// What the kernel prints (%*pb, nbits = nr_cpu_ids).
	tests := []struct {
		cpus  []int
		nbits int
		want  string
	}{
		{nil, 2, "0"},
		{nil, 4, "0"},
		{[]int{0, 1, 2, 3}, 4, "f"},
		{nil, 8, "00"},
		{[]int{0}, 8, "01"},
		{[]int{0}, 32, "00000001"},
		{[]int{0}, 48, "0000,00000001"},
		{[]int{32}, 48, "0001,00000000"},
		{rangeInts(0, 47), 48, "ffff,ffffffff"},
		{[]int{0}, 64, "00000000,00000001"},
		{[]int{0, 5}, 3, "1"}, // CPUs at or above nbits are not shown
	}
	for _, tt := range tests {
		if got := Of(tt.cpus...).KernelMask(tt.nbits); got != tt.want {
			t.Errorf("%v.KernelMask(%d) = %q, want %q", tt.cpus, tt.nbits, got, tt.want)
		}
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		err  bool
	}{
		{in: "", want: nil},
		{in: "0", want: []int{0}},
		{in: "0-3", want: []int{0, 1, 2, 3}},
		{in: "0,1,2,3", want: []int{0, 1, 2, 3}},
		{in: "0-1,3,5-6", want: []int{0, 1, 3, 5, 6}},
		{in: "3,1", want: []int{1, 3}},
		{in: " 0-1\n", want: []int{0, 1}},
		{in: "8191", want: []int{8191}},
		{in: "8192", err: true},
		{in: "99999999999999999999", err: true},
		{in: "3-1", err: true},
		{in: "a", err: true},
		{in: "1-", err: true},
		{in: "-1", err: true},
		{in: "all", err: true},
		{in: "0-3:1/2", err: true},
	}
	for _, tt := range tests {
		got, err := ParseList(tt.in)
		if tt.err {
			if err == nil {
				t.Errorf("ParseList(%q) = %v, want error", tt.in, got.CPUs())
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseList(%q): %v", tt.in, err)
			continue
		}
		if !got.Equal(Of(tt.want...)) {
			t.Errorf("ParseList(%q) = %v, want %v", tt.in, got.CPUs(), tt.want)
		}
	}
}

func TestSameMaskAndList(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"1", "00000001", true},
		{"1", "0,00000001", true},
		{"f", "F", true},
		{"0", "00", true},
		{"1", "2", false},
		{"1,00000000", "100000000", false}, // second does not parse
		{"", "0", false},
		{"garbage", "garbage", false},
	}
	for _, tt := range tests {
		if got := SameMask(tt.a, tt.b); got != tt.want {
			t.Errorf("SameMask(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
	lists := []struct {
		a, b string
		want bool
	}{
		{"0-3", "0,1,2,3", true},
		{"", "", true},
		{"0-1", "1", false},
		{"x", "x", false},
	}
	for _, tt := range lists {
		if got := SameList(tt.a, tt.b); got != tt.want {
			t.Errorf("SameList(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestCPUSetOps(t *testing.T) {
	a := Of(0, 2, 64)
	b := a.Add(5)
	if a.Has(5) || !b.Has(5) {
		t.Fatal("Add changed the receiver or did not add")
	}
	if c := b.Remove(64); c.Has(64) || !b.Has(64) {
		t.Fatal("Remove changed the receiver or did not remove")
	}
	if got := a.Union(Of(1)).List(); got != "0-2,64" {
		t.Errorf("Union = %q", got)
	}
	if got := a.Intersect(Of(2, 64, 70)).List(); got != "2,64" {
		t.Errorf("Intersect = %q", got)
	}
	if a.Len() != 3 || a.Max() != 64 || (Set{}).Max() != -1 || !(Set{}).IsEmpty() {
		t.Errorf("Len/Max/IsEmpty wrong: %d %d", a.Len(), a.Max())
	}
	if !Of(1).Equal(Of(1, 200).Remove(200)) {
		t.Error("Equal must ignore trailing zero words")
	}
	if got := Range(3, 1); !got.IsEmpty() {
		t.Error("Range(3,1) not empty")
	}
}

// TestMaskRoundTrip is the property test: for every machine size 1..256
// and random sets, Mask and List parse back to the same set, the kernel's
// printed form parses to it too, and mask and list agree.
func TestMaskRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 256; n++ {
		sets := []Set{{}, Range(0, n-1), Of(n - 1), Of(0)}
		for range 20 {
			var s Set
			for c := 0; c < n; c++ {
				if rng.IntN(3) == 0 {
					s = s.Add(c)
				}
			}
			sets = append(sets, s)
		}
		for _, s := range sets {
			m, err := ParseMask(s.Mask())
			if err != nil || !m.Equal(s) {
				t.Fatalf("n=%d: ParseMask(%q) = %v, %v; want %v", n, s.Mask(), m.CPUs(), err, s.CPUs())
			}
			k, err := ParseMask(s.KernelMask(n))
			if err != nil || !k.Equal(s) {
				t.Fatalf("n=%d: ParseMask(KernelMask %q) = %v, %v", n, s.KernelMask(n), k.CPUs(), err)
			}
			l, err := ParseList(s.List())
			if err != nil || !l.Equal(s) {
				t.Fatalf("n=%d: ParseList(%q) = %v, %v", n, s.List(), l.CPUs(), err)
			}
			if !SameMask(s.Mask(), s.KernelMask(n)) {
				t.Fatalf("n=%d: SameMask(%q, %q) false", n, s.Mask(), s.KernelMask(n))
			}
			// Every group the kernel would read has at most 8 digits.
			for _, g := range strings.Split(s.Mask(), ",") {
				if len(g) > 8 {
					t.Fatalf("n=%d: group %q of %q too long", n, g, s.Mask())
				}
			}
		}
	}
}

func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"0", "f", "1,00000000", "ffff,ffffffff", "1,,5", "", "100000000", " e\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseMask(s)
		if err != nil {
			return
		}
		// Whatever parses formats to a mask that parses to the same set,
		// with no group longer than the kernel accepts.
		m := set.Mask()
		back, err := ParseMask(m)
		if err != nil || !back.Equal(set) {
			t.Fatalf("ParseMask(%q) -> %q -> %v, %v", s, m, back.CPUs(), err)
		}
		for _, g := range strings.Split(m, ",") {
			if len(g) > 8 {
				t.Fatalf("group %q of %q", g, m)
			}
		}
		l, err := ParseList(set.List())
		if err != nil || !l.Equal(set) {
			t.Fatalf("list round trip of %q: %v", s, err)
		}
	})
}

func FuzzParseList(f *testing.F) {
	for _, s := range []string{"", "0-3", "0,2-5", "8191", "3-1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseList(s)
		if err != nil {
			return
		}
		back, err := ParseList(set.List())
		if err != nil || !back.Equal(set) {
			t.Fatalf("ParseList(%q) -> %q -> %v", s, set.List(), err)
		}
	})
}

func rangeInts(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

func TestFromFunc(t *testing.T) {
	tests := []struct {
		n    int
		in   []int
		want string
	}{
		{0, []int{1}, ""},
		{4, []int{0, 3, 9}, "0,3"},
		{200, []int{0, 64, 130, 199}, "0,64,130,199"},
		{MaxCPUs + 100, []int{MaxCPUs - 1, MaxCPUs + 5}, "8191"},
	}
	for _, tt := range tests {
		in := Of(tt.in...)
		if got := FromFunc(tt.n, in.Has).List(); got != tt.want {
			t.Errorf("FromFunc(%d, %v) = %q, want %q", tt.n, tt.in, got, tt.want)
		}
	}
}
