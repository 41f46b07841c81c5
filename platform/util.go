package platform

import (
	"sort"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
)

func sortedInts(a []int) []int {
	sort.Ints(a)
	return a
}

// queueIndex parses "rx-12" with prefix "rx-" into 12.
func queueIndex(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || outline.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}
