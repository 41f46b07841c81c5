// Package cpuset is the one CPU-set type of the project and the kernel's two
// text forms of it: the hex mask (rps_cpus, xps_cpus, smp_affinity; printed
// with %*pb, lib/vsprintf.c bitmap_string, read with lib/bitmap-str.c
// bitmap_parse) and the cpu list ("0-3,8"; cpu/online, Cpus_allowed_list,
// smp_affinity_list; printed with %*pbl). It is a leaf: it imports only the
// standard library, so platform, steering and everything above share it.
//
// The set operations carry //go:noinline: they are called from hundreds
// of places in the plan rules, and inlining each call (with its make and
// copy) cost about 8 KB of the xz-compressed router binary (make size)
// for no measurable gain in a plan built a few times a minute at most.
package cpuset

import (
	"errors"
	"math/bits"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// MaxCPUs bounds the CPU numbers ParseMask and ParseList accept. It is the
// largest NR_CPUS any Linux architecture configures (x86_64 MAXSMP: 8192);
// the bound keeps hostile input from allocating without limit.
const MaxCPUs = 8192

// errMask is wrapped by every ParseMask/ParseList error.
var errMask = errors.New("bad cpu set")

// Set is a set of CPU numbers of any size. The zero value is the empty
// set. A Set is a value: the methods that change it return a new set and
// never modify the receiver's backing array.
type Set struct {
	w []uint64 // bit i of w[i/64] is CPU i; trailing zero words are allowed
}

// Of returns the set holding cpus. Negative numbers are ignored.
//
//go:noinline
func Of(cpus ...int) Set {
	var s Set
	for _, c := range cpus {
		s = s.Add(c)
	}
	return s
}

// Range returns the set of CPUs first..last inclusive (empty when
// last < first or first < 0).
//
//go:noinline
func Range(first, last int) Set {
	if first < 0 || last < first {
		return Set{}
	}
	w := make([]uint64, last/64+1)
	for c := first; c <= last; c++ {
		w[c/64] |= 1 << (uint(c) % 64)
	}
	return Set{w: w}
}

// Add returns the set with cpu added. A negative cpu leaves it unchanged.
//
//go:noinline
func (c Set) Add(cpu int) Set {
	if cpu < 0 {
		return c
	}
	n := len(c.w)
	if need := cpu/64 + 1; need > n {
		n = need
	}
	w := make([]uint64, n)
	copy(w, c.w)
	w[cpu/64] |= 1 << (uint(cpu) % 64)
	return Set{w: w}
}

// Remove returns the set without cpu.
//
//go:noinline
func (c Set) Remove(cpu int) Set {
	if !c.Has(cpu) {
		return c
	}
	w := make([]uint64, len(c.w))
	copy(w, c.w)
	w[cpu/64] &^= 1 << (uint(cpu) % 64)
	return Set{w: w}
}

// Union returns the CPUs in c or o.
//
//go:noinline
func (c Set) Union(o Set) Set {
	a, b := c.w, o.w
	if len(a) < len(b) {
		a, b = b, a
	}
	w := make([]uint64, len(a))
	copy(w, a)
	for i, x := range b {
		w[i] |= x
	}
	return Set{w: w}
}

// Intersect returns the CPUs in both c and o.
//
//go:noinline
func (c Set) Intersect(o Set) Set {
	n := min(len(c.w), len(o.w))
	w := make([]uint64, n)
	for i := range n {
		w[i] = c.w[i] & o.w[i]
	}
	return Set{w: w}
}

// Has reports whether cpu is in the set.
//
//go:noinline
func (c Set) Has(cpu int) bool {
	if cpu < 0 || cpu/64 >= len(c.w) {
		return false
	}
	return c.w[cpu/64]&(1<<(uint(cpu)%64)) != 0
}

// Len is the number of CPUs in the set.
//
//go:noinline
func (c Set) Len() int {
	n := 0
	for _, x := range c.w {
		n += bits.OnesCount64(x)
	}
	return n
}

// IsEmpty reports whether the set holds no CPU.
//
//go:noinline
func (c Set) IsEmpty() bool {
	for _, x := range c.w {
		if x != 0 {
			return false
		}
	}
	return true
}

// Max is the highest CPU in the set, -1 when it is empty.
//
//go:noinline
func (c Set) Max() int {
	for i := len(c.w) - 1; i >= 0; i-- {
		if c.w[i] != 0 {
			return i*64 + 63 - bits.LeadingZeros64(c.w[i])
		}
	}
	return -1
}

// CPUs lists the CPUs in ascending order.
//
//go:noinline
func (c Set) CPUs() []int {
	out := make([]int, 0, c.Len())
	for i, x := range c.w {
		for x != 0 {
			b := bits.TrailingZeros64(x)
			out = append(out, i*64+b)
			x &^= 1 << uint(b)
		}
	}
	return out
}

// Equal reports whether both sets hold the same CPUs.
//
//go:noinline
func (c Set) Equal(o Set) bool {
	a, b := c.w, o.w
	if len(a) < len(b) {
		a, b = b, a
	}
	for i, x := range a {
		var y uint64
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return false
		}
	}
	return true
}

// group32 returns the 32-bit group g (CPUs 32g..32g+31).
func (c Set) group32(g int) uint32 {
	i := g / 2
	if i >= len(c.w) {
		return 0
	}
	return uint32(c.w[i] >> (32 * uint(g%2)))
}

// Mask formats the set as the kernel's hex mask, with only the groups the set
// needs: 32-bit groups from the highest down, separated by commas, the first
// unpadded and the others zero-padded to 8 digits. CPU 0 is "1", CPUs 0-3
// "f", CPU 32 "1,00000000", the empty set "0". The kernel's bitmap_parse
// (lib/bitmap-str.c) reads this form for every nr_cpu_ids, which is what a
// writer needs. KernelMask gives the exact text the kernel prints.
func (c Set) Mask() string {
	top := c.Max()
	if top < 0 {
		return "0"
	}
	return c.formatMask(top/32+1, 0)
}

// KernelMask formats the set as the kernel prints a mask of nbits bits
// (%*pb in lib/vsprintf.c bitmap_string, used for rps_cpus, xps_cpus and
// smp_affinity with nbits = nr_cpu_ids): every 32-bit group is printed, the
// highest zero-padded to the digits its nbits%32 bits need (32 when zero),
// the others to 8. With 8 CPUs CPU 0 prints as "01", with 48 as
// "0000,00000001". CPUs at or above nbits are not shown. nbits < 1 is
// treated as 1.
func (c Set) KernelMask(nbits int) string {
	if nbits < 1 {
		nbits = 1
	}
	groups := (nbits + 31) / 32
	first := nbits % 32
	if first == 0 {
		first = 32
	}
	return c.formatMask(groups, first)
}

// formatMask prints groups 32-bit groups. firstBits > 0 pads the first group
// to ceil(firstBits/4) digits and masks it to firstBits bits.
func (c Set) formatMask(groups, firstBits int) string {
	var b strings.Builder
	b.Grow(groups * 9)
	for g := groups - 1; g >= 0; g-- {
		v := c.group32(g)
		if g == groups-1 {
			if firstBits > 0 {
				if firstBits < 32 {
					v &= (1 << uint(firstBits)) - 1
				}
				s := outline.FormatUint(uint64(v), 16)
				for pad := (firstBits+3)/4 - len(s); pad > 0; pad-- {
					b.WriteByte('0')
				}
				b.WriteString(s)
			} else {
				b.WriteString(outline.FormatUint(uint64(v), 16))
			}
			continue
		}
		b.WriteByte(',')
		s := outline.FormatUint(uint64(v), 16)
		for pad := 8 - len(s); pad > 0; pad-- {
			b.WriteByte('0')
		}
		b.WriteString(s)
	}
	return b.String()
}

// List formats the set as the kernel's cpu list (%*pbl): ascending ranges
// "a-b" and single CPUs separated by commas, "0-3,5"; the empty set is "".
func (c Set) List() string {
	var b strings.Builder
	cpus := c.CPUs()
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(outline.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(outline.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// String is List, or "none" for the empty set.
func (c Set) String() string {
	if c.IsEmpty() {
		return "none"
	}
	return c.List()
}

// isMaskSep is the kernel's __end_of_region: whitespace or a comma.
//
//go:noinline
func isMaskSep(ch byte) bool {
	return ch == ',' || ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r'
}

// ParseMask parses a kernel hex mask the way the kernel's bitmap_parse
// (lib/bitmap-str.c) reads rps_cpus, xps_cpus and smp_affinity: groups of at
// most 8 hex digits (32 bits) separated by commas or whitespace, the last
// group holding CPUs 0-31; runs of separators count as one; a newline ends
// the input. "f" is CPUs 0-3, "1,00000000" CPU 32, "0" the empty set.
//
// Differences from the kernel, on purpose: input without any hex digit ("",
// ",") is an error rather than the empty set, since it is never what a user
// or the kernel's own output means; and CPUs at or above MaxCPUs are
// rejected. A group of more than 8 digits is an error, as in the kernel
// (EOVERFLOW); so is any character that is not a hex digit or separator.
func ParseMask(s string) (Set, error) {
	text := s
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	var w []uint64
	group := 0
	digits := 0
	end := len(text) - 1
	for {
		for end >= 0 && isMaskSep(text[end]) {
			end--
		}
		if end < 0 {
			break
		}
		var v uint32
		n := 0
		for end >= 0 && !isMaskSep(text[end]) {
			d, ok := hexDigit(text[end])
			if !ok {
				return Set{}, outline.Errorf("%w: mask %q: %q is not a hex digit", errMask, s, text[end])
			}
			if n == 8 {
				return Set{}, outline.Errorf("%w: mask %q: a group has more than 8 hex digits (32 bits)", errMask, s)
			}
			v |= uint32(d) << (4 * uint(n))
			n++
			end--
		}
		digits += n
		if v != 0 {
			if group*32 >= MaxCPUs {
				return Set{}, outline.Errorf("%w: mask %q names a CPU above %d", errMask, s, MaxCPUs-1)
			}
			for len(w) <= group/2 {
				w = append(w, 0)
			}
			w[group/2] |= uint64(v) << (32 * uint(group%2))
		}
		group++
		if group > MaxCPUs/32+1 {
			return Set{}, outline.Errorf("%w: mask %q has more than %d groups", errMask, s, MaxCPUs/32)
		}
	}
	if digits == 0 {
		return Set{}, outline.Errorf("%w: mask %q has no hex digits", errMask, s)
	}
	return Set{w: w}, nil
}

func hexDigit(ch byte) (byte, bool) {
	switch {
	case ch >= '0' && ch <= '9':
		return ch - '0', true
	case ch >= 'a' && ch <= 'f':
		return ch - 'a' + 10, true
	case ch >= 'A' && ch <= 'F':
		return ch - 'A' + 10, true
	}
	return 0, false
}

// ParseList parses a cpu list as the kernel prints it in Cpus_allowed_list
// and smp_affinity_list and as taskset -c takes it: decimal CPU numbers and
// ranges "a-b" separated by commas (whitespace is tolerated around them);
// "" is the empty set. The kernel's extra forms ("all", "N", "a-b:x/y") are
// not accepted: they depend on nr_cpu_ids, which a plan must not. Ranges
// with b < a and CPUs at or above MaxCPUs are errors.
func ParseList(s string) (Set, error) {
	var set Set
	var w []uint64
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r < 128 && isMaskSep(byte(r)) }) {
		lo, hi := part, part
		if i := strings.IndexByte(part, '-'); i >= 0 {
			lo, hi = part[:i], part[i+1:]
		}
		a, err := parseCPU(lo)
		if err != nil {
			return set, outline.Errorf("%w: cpu list %q: %v", errMask, s, err)
		}
		b, err := parseCPU(hi)
		if err != nil {
			return set, outline.Errorf("%w: cpu list %q: %v", errMask, s, err)
		}
		if b < a {
			return set, outline.Errorf("%w: cpu list %q: range %s ends before it starts", errMask, s, part)
		}
		for len(w) <= b/64 {
			w = append(w, 0)
		}
		for c := a; c <= b; c++ {
			w[c/64] |= 1 << (uint(c) % 64)
		}
	}
	return Set{w: w}, nil
}

func parseCPU(s string) (int, error) {
	if s == "" {
		return 0, errors.New("empty CPU number")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, outline.Errorf("%q is not a CPU number", s)
		}
	}
	if len(s) > 5 {
		return 0, outline.Errorf("CPU %s is above %d", s, MaxCPUs-1)
	}
	n, _ := strconv.Atoi(s)
	if n >= MaxCPUs {
		return 0, outline.Errorf("CPU %d is above %d", n, MaxCPUs-1)
	}
	return n, nil
}

// SameMask reports whether two hex masks name the same CPUs ("00000001" and
// "1" do; "0,00000001" and "1" do). Either one unparseable: false.
func SameMask(a, b string) bool {
	x, err := ParseMask(a)
	if err != nil {
		return false
	}
	y, err := ParseMask(b)
	if err != nil {
		return false
	}
	return x.Equal(y)
}

// SameList reports whether two cpu lists name the same CPUs ("0-3" and
// "0,1,2,3" do). Either one unparseable: false.
func SameList(a, b string) bool {
	x, err := ParseList(a)
	if err != nil {
		return false
	}
	y, err := ParseList(b)
	if err != nil {
		return false
	}
	return x.Equal(y)
}

// FromFunc returns the set of CPUs c in 0..n-1 for which has(c) is true. It
// turns another package's bitmap (unix.CPUSet's IsSet) into a Set without
// this package depending on it.
func FromFunc(n int, has func(cpu int) bool) Set {
	var s Set
	for c := 0; c < n && c < MaxCPUs; c++ {
		if has(c) {
			if c/64 >= len(s.w) {
				s.w = append(s.w, make([]uint64, c/64+1-len(s.w))...)
			}
			s.w[c/64] |= 1 << (uint(c) % 64)
		}
	}
	return s
}
