package main

import (
	"fmt"
	"io"

	"github.com/packet-steering/packet-steering/plan"
)

// printPhyThreads adds to a wifi device's rows the threads of its mt76
// phy with what each does ("rx-data 56%", "tx-worker"), their CPUs and the
// wanted ones.
func printPhyThreads(w io.Writer, threads []plan.PhyThread) {
	if len(threads) == 0 {
		return
	}
	fmt.Fprintf(w, "  PHY THREAD\tROLE\tCPUS\n")
	for _, t := range threads {
		role := t.Role
		if t.Share > 0 {
			role = fmt.Sprintf("%s (%d%% of rx CPU time)", role, t.Share)
		}
		fmt.Fprintf(w, "  %s [%d]\t%s\t%s\n", t.Thread, t.PID, role, wantList(t.CPUs, t.WantCPUs))
	}
}
