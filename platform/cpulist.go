package platform

import (
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// maxCPUs bounds the CPU numbers accepted from cpu lists and masks, so a
// garbage file cannot make a parser allocate without limit. The kernel's
// NR_CPUS tops out at 8192 on the largest configurations.
const maxCPUs = 8192

// ParseCPUList parses the kernel's cpu list format ("0-3,8,10-11", as in
// sys/devices/system/cpu/online and Cpus_allowed_list; printed with %*pbl,
// see lib/vsprintf.c bitmap_list_string). Also accepts strides of
// lib/bitmap-str.c bitmap_parselist ("0-7:2/4"). An empty string is the
// empty set. The result is sorted and without duplicates.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		rng, stride, hasStride := strings.Cut(part, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		a, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("cpu list %q: range %d-%d goes down", s, a, b)
			}
		}
		used, group := 1, 1
		if hasStride {
			u, g, ok := strings.Cut(stride, "/")
			if !ok || !isRange {
				return nil, fmt.Errorf("cpu list %q: bad stride %q", s, part)
			}
			if used, err = strconv.Atoi(u); err != nil || used < 1 {
				return nil, fmt.Errorf("cpu list %q: bad stride %q", s, part)
			}
			if group, err = strconv.Atoi(g); err != nil || group < used {
				return nil, fmt.Errorf("cpu list %q: bad stride %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			if (c-a)%group < used {
				seen[c] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}

func parseCPU(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("bad cpu number %q", s)
	}
	if n < 0 || n >= maxCPUs {
		return 0, fmt.Errorf("cpu number %d out of range", n)
	}
	return n, nil
}

// FormatCPUList prints CPUs in the kernel's cpu list format ("0-2,5").
// The input need not be sorted; duplicates are dropped. Empty gives "".
func FormatCPUList(cpus []int) string {
	c := append([]int(nil), cpus...)
	sort.Ints(c)
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && (c[j+1] == c[j] || c[j+1] == c[j]+1) {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c[i]))
		if c[j] != c[i] {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(c[j]))
		}
		i = j + 1
	}
	return b.String()
}

// ParseMask parses a CPU mask in the kernel's hex format (rps_cpus,
// xps_cpus, smp_affinity: printed with %*pb, lib/vsprintf.c bitmap_string):
// 32-bit groups of hex digits separated by commas, most significant first
// ("1,00000000" is CPU 32). It returns the CPUs set, sorted.
func ParseMask(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty cpu mask")
	}
	groups := strings.Split(s, ",")
	if len(groups)*32 > maxCPUs {
		return nil, fmt.Errorf("cpu mask %q: too many groups", s)
	}
	var cpus []int
	for gi := len(groups) - 1; gi >= 0; gi-- {
		g := groups[gi]
		if g == "" || len(g) > 8 {
			return nil, fmt.Errorf("cpu mask %q: bad group %q", s, g)
		}
		v, err := strconv.ParseUint(g, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("cpu mask %q: bad group %q", s, g)
		}
		base := (len(groups) - 1 - gi) * 32
		for v != 0 {
			b := bits.TrailingZeros64(v)
			cpus = append(cpus, base+b)
			v &^= 1 << b
		}
	}
	return cpus, nil
}

// FormatMask prints CPUs as a kernel hex mask for a machine with n possible
// CPUs, as the kernel prints it: zero-padded to n bits, 32-bit groups
// separated by commas ("0" for 4 CPUs, "0000,00000000" for 48).
// CPUs at or above n are still printed (the width grows).
func FormatMask(cpus []int, n int) string {
	top := n
	for _, c := range cpus {
		if c >= top {
			top = c + 1
		}
	}
	if top < 1 {
		top = 1
	}
	words := make([]uint32, (top+31)/32)
	for _, c := range cpus {
		if c >= 0 {
			words[c/32] |= 1 << (c % 32)
		}
	}
	var b strings.Builder
	for i := len(words) - 1; i >= 0; i-- {
		digits := 8
		if i == len(words)-1 {
			bitsInTop := top - 32*i
			digits = (bitsInTop + 3) / 4
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%0*x", digits, words[i])
	}
	return b.String()
}
