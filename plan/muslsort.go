package plan

import "math/bits"

// The stock script picks CPUs with ucode's sort(), which hands the array to
// the C library's qsort. OpenWrt links musl, whose qsort is a smoothsort
// (musl src/stdlib/qsort.c): not stable, so which of several equally loaded
// CPUs comes first depends on the exact sequence of comparisons and moves.
// With loads like [0.75 0 0 0] musl puts CPU2 first, not CPU1. To give the
// same writes as the script on a router, muslSort below performs the same
// comparisons and element moves as musl's smoothsort on the same input;
// testdata/musl_qsort.txt holds permutations produced by musl
// 1.2.3's qsort itself, which the tests compare against.
//
// The algorithm (Dijkstra's smoothsort as musl implements it): the array is
// built left to right into a forest of Leonardo heaps (sizes L0 = L1 = 1,
// Lk = Lk-2 + Lk-1 + 1), whose shape is the bit vector p (bit i set: a heap
// of order pshift+i) and pshift (order of the rightmost heap). A new element
// either merges the two rightmost heaps (p ends in binary 11: sift it down
// as their root) or starts a heap of order 1 or 0; when the heap it roots
// cannot grow further (its order's size reaches past the end) it is
// "trinkled": moved left along the heap roots while the root on its left is
// larger (and larger than its children), then sifted. Then the heaps are
// taken apart from the right, the largest root always at the end. Sifting
// collects the path of elements to move and rotates them in one cycle.

// muslSorter sorts a slice of CPUs by load like musl's qsort with the
// stock comparator (a.load - b.load, compared to 0).
type muslSorter struct {
	a  []*stockCPU
	lp []int // Leonardo numbers below the array length
}

//go:noinline
func (s *muslSorter) cmp(i, j int) int {
	d := s.a[i].load - s.a[j].load
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// cycle moves the element at ar[1] to ar[0], ar[2] to ar[1], ..., and the
// old ar[0] to ar[n-1].
//
//go:noinline
func (s *muslSorter) cycle(ar []int) {
	if len(ar) < 2 {
		return
	}
	tmp := s.a[ar[0]]
	for i := 0; i < len(ar)-1; i++ {
		s.a[ar[i]] = s.a[ar[i+1]]
	}
	s.a[ar[len(ar)-1]] = tmp
}

func (s *muslSorter) sift(head, pshift int) {
	ar := []int{head}
	for pshift > 1 {
		rt := head - 1
		lf := head - 1 - s.lp[pshift-2]
		if s.cmp(ar[0], lf) >= 0 && s.cmp(ar[0], rt) >= 0 {
			break
		}
		if s.cmp(lf, rt) >= 0 {
			ar = append(ar, lf)
			head = lf
			pshift--
		} else {
			ar = append(ar, rt)
			head = rt
			pshift -= 2
		}
	}
	s.cycle(ar)
}

func (s *muslSorter) trinkle(head int, pp [2]uint64, pshift int, trusty bool) {
	p := pp
	ar := []int{head}
	for p[0] != 1 || p[1] != 0 {
		stepson := head - s.lp[pshift]
		if s.cmp(stepson, ar[0]) <= 0 {
			break
		}
		if !trusty && pshift > 1 {
			rt := head - 1
			lf := head - 1 - s.lp[pshift-2]
			if s.cmp(rt, stepson) >= 0 || s.cmp(lf, stepson) >= 0 {
				break
			}
		}
		ar = append(ar, stepson)
		head = stepson
		trail := pntz(p)
		p = shr(p, trail)
		pshift += trail
		trusty = false
	}
	if !trusty {
		s.cycle(ar)
		s.sift(head, pshift)
	}
}

// pntz is the number of trailing zeros of p - 1 over both words.
func pntz(p [2]uint64) int {
	if p[0]-1 != 0 {
		return bits.TrailingZeros64(p[0] - 1)
	}
	if p[1] != 0 {
		return 64 + bits.TrailingZeros64(p[1])
	}
	return 0
}

//go:noinline
func shl(p [2]uint64, n int) [2]uint64 {
	if n >= 64 {
		n -= 64
		p[1] = p[0]
		p[0] = 0
	}
	p[1] <<= uint(n)
	p[1] |= p[0] >> uint(64-n)
	p[0] <<= uint(n)
	return p
}

//go:noinline
func shr(p [2]uint64, n int) [2]uint64 {
	if n >= 64 {
		n -= 64
		p[0] = p[1]
		p[1] = 0
	}
	p[0] >>= uint(n)
	p[0] |= p[1] << uint(64-n)
	p[1] >>= uint(n)
	return p
}

// muslSortByLoad sorts cpus in place by load as musl's qsort would.
func muslSortByLoad(cpus []*stockCPU) {
	n := len(cpus)
	if n < 2 {
		return
	}
	s := &muslSorter{a: cpus, lp: []int{1, 1}}
	for {
		k := len(s.lp)
		next := s.lp[k-2] + s.lp[k-1] + 1
		s.lp = append(s.lp, next)
		if next >= n {
			break
		}
	}
	high := n - 1
	head := 0
	p := [2]uint64{1, 0}
	pshift := 1
	for head < high {
		if p[0]&3 == 3 {
			s.sift(head, pshift)
			p = shr(p, 2)
			pshift += 2
		} else {
			if s.lp[pshift-1] >= high-head {
				s.trinkle(head, p, pshift, false)
			} else {
				s.sift(head, pshift)
			}
			if pshift == 1 {
				p = shl(p, 1)
				pshift = 0
			} else {
				p = shl(p, pshift-1)
				pshift = 1
			}
		}
		p[0] |= 1
		head++
	}
	s.trinkle(head, p, pshift, false)
	for pshift != 1 || p[0] != 1 || p[1] != 0 {
		if pshift <= 1 {
			trail := pntz(p)
			p = shr(p, trail)
			pshift += trail
		} else {
			p = shl(p, 2)
			pshift -= 2
			p[0] ^= 7
			p = shr(p, 1)
			s.trinkle(head-s.lp[pshift]-1, p, pshift+1, true)
			p = shl(p, 1)
			p[0] |= 1
			s.trinkle(head-1, p, pshift, true)
		}
		head--
	}
}
