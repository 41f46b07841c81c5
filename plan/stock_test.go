package plan

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestMuslSortMatchesMusl compares muslSortByLoad with permutations musl's
// own qsort produced (testdata/musl_qsort.c, run against musl 1.2.3): every
// tie broken the same way.
func TestMuslSortMatchesMusl(t *testing.T) {
	f, err := os.Open("testdata/musl_qsort.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	cases := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		in, out, ok := strings.Cut(line, " -> ")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		var cpus []*stockCPU
		for i, f := range strings.Fields(in) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			cpus = append(cpus, &stockCPU{id: i, load: v})
		}
		muslSortByLoad(cpus)
		var got []string
		for _, c := range cpus {
			got = append(got, strconv.Itoa(c.id))
		}
		if strings.Join(got, " ") != out {
			t.Errorf("loads %s:\n got  %s\n musl %s", in, strings.Join(got, " "), out)
		}
		cases++
	}
	if cases < 500 {
		t.Fatalf("only %d cases", cases)
	}
}

// The tie that matters on a 4-CPU router: after one pick on CPU0, musl's
// qsort puts CPU2 first among the idle CPUs, and the stock script follows.
func TestStockTieBreak(t *testing.T) {
	cpus := []*stockCPU{{id: 0, load: 0.75}, {id: 1}, {id: 2}, {id: 3}}
	r := &stockRun{cpus: cpus}
	if got := r.nextCPU(rxWeight, -1); got != 2 {
		t.Errorf("pick %d, want 2 (musl order)", got)
	}
	// The sort works on a copy: the CPU list keeps its order.
	for i, c := range r.cpus {
		if c.id != i {
			t.Fatalf("cpu list reordered: %v", r.cpus)
		}
	}
}
