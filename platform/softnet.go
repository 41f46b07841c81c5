package platform

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Softnet counters, from proc/net/softnet_stat (net/core/net-procfs.c
// softnet_seq_show): one row per online CPU, hex fields:
//
//	1 processed  2 dropped  3 time_squeeze  4-9 zero (unused)
//	10 received_rps  11 flow_limit_count  12 backlog length
//	13 CPU id  14 input_qlen  15 process_qlen
//
// Kernels have printed 9 (before 3.11), 11, 13 (since 5.10) and 15 (since
// 6.x) columns. The CPU id exists only since 13 columns; before, the row
// index stands in for it (wrong when CPUs are offline, but all there is).
const softnetPath = "proc/net/softnet_stat"

// parseSoftnet parses proc/net/softnet_stat. A row with fewer than 9 fields
// or a non-hex field is an error (rows before it are returned).
func parseSoftnet(r io.Reader) ([]SoftnetStat, error) {
	sc := bufio.NewScanner(r)
	stats := []SoftnetStat{}
	for row := 0; sc.Scan(); row++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			row--
			continue
		}
		if len(fields) < 9 {
			return stats, fmt.Errorf("softnet_stat row %d: %d columns, want at least 9", row, len(fields))
		}
		vals := make([]uint64, len(fields))
		for i, fld := range fields {
			v, err := strconv.ParseUint(fld, 16, 32)
			if err != nil {
				return stats, fmt.Errorf("softnet_stat row %d column %d: bad hex %q", row, i+1, fld)
			}
			vals[i] = v
		}
		s := SoftnetStat{CPU: row, Processed: vals[0], Dropped: vals[1], TimeSqueeze: vals[2]}
		if len(vals) >= 10 {
			s.RPSReceived = vals[9]
		}
		if len(vals) >= 11 {
			s.FlowLimit = vals[10]
		}
		if len(vals) >= 13 {
			if vals[12] >= maxCPUs {
				return stats, fmt.Errorf("softnet_stat row %d: cpu %d out of range", row, vals[12])
			}
			s.CPU = int(vals[12])
		}
		stats = append(stats, s)
	}
	if err := sc.Err(); err != nil {
		return stats, fmt.Errorf("softnet_stat: %w", err)
	}
	return stats, nil
}

func (f FS) readSoftnet(g *gaps) []SoftnetStat {
	fh, err := os.Open(f.Path(softnetPath))
	if err != nil {
		g.add(softnetPath, err)
		return []SoftnetStat{}
	}
	defer fh.Close()
	s, err := parseSoftnet(fh)
	if err != nil {
		g.add(softnetPath, err)
	}
	return s
}

// rpsSockFlowEntriesPath is net.core.rps_sock_flow_entries
// (Documentation/admin-guide/sysctl/net.rst).
const rpsSockFlowEntriesPath = "proc/sys/net/core/rps_sock_flow_entries"

// readRPSSockFlowEntries returns the sysctl, or -1 when it is unreadable
// (kernels without CONFIG_RPS have no such file).
func (f FS) readRPSSockFlowEntries(g *gaps) int {
	n, err := f.readInt(rpsSockFlowEntriesPath)
	if err != nil {
		g.add(rpsSockFlowEntriesPath, err)
		return -1
	}
	if n < 0 {
		g.add(rpsSockFlowEntriesPath, errors.New("negative value"))
		return -1
	}
	return n
}
