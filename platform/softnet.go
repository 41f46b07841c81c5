package platform

import (
	"bytes"
	"errors"
	"io"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
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
//
// The kernel keeps these counters as 32-bit unsigned ints and prints them
// with %08x, so they wrap at 2^32; the columns are read as 64-bit values
// all the same, so a wider counter is never mistaken for bad input and no
// value is cut to the host's int size. Telling a wrap from a reset is the
// business of whoever subtracts two readings.
const softnetPath = "proc/net/softnet_stat"

// softnetMinColumns is the fewest columns a softnet_stat row has had.
const softnetMinColumns = 9

// ParseSoftnet parses proc/net/softnet_stat, one SoftnetStat per row. A row
// with fewer than 9 columns, a field that is not hex or above 64 bits, or a
// CPU id out of range is an error; the rows before it are returned.
func ParseSoftnet(r io.Reader) ([]SoftnetStat, error) {
	b, err := io.ReadAll(io.LimitReader(r, kfs.MaxFile))
	if err != nil {
		return []SoftnetStat{}, outline.Errorf("softnet_stat: %w", err)
	}
	return parseSoftnetBytes(b)
}

// parseSoftnetBytes is ParseSoftnet on the file's contents.
func parseSoftnetBytes(b []byte) ([]SoftnetStat, error) {
	stats := []SoftnetStat{}
	var vals [softnetColumns]uint64
	row := 0
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		n := 0
		for rest := line; ; n++ {
			var fld []byte
			if fld, rest = nextField(rest); fld == nil {
				break
			}
			v, ok := parseHex64(fld)
			if !ok {
				if c := countFields(line); c < softnetMinColumns {
					return stats, outline.Errorf("softnet_stat row %d: %d columns, want at least %d", row, c, softnetMinColumns)
				}
				return stats, outline.Errorf("softnet_stat row %d column %d: bad hex %q", row, n+1, fld)
			}
			if n < len(vals) {
				vals[n] = v
			}
		}
		if n == 0 {
			continue
		}
		if n < softnetMinColumns {
			return stats, outline.Errorf("softnet_stat row %d: %d columns, want at least %d", row, n, softnetMinColumns)
		}
		s := SoftnetStat{CPU: row, Processed: vals[0], Dropped: vals[1], TimeSqueeze: vals[2]}
		if n >= 10 {
			s.RPSReceived = vals[9]
		}
		if n >= 11 {
			s.FlowLimit = vals[10]
		}
		if n >= 13 {
			if vals[12] >= cpuset.MaxCPUs {
				return stats, outline.Errorf("softnet_stat row %d: cpu %d out of range", row, vals[12])
			}
			s.CPU = int(vals[12])
		}
		stats = append(stats, s)
		row++
	}
	return stats, nil
}

// softnetColumns is how many leading columns parseSoftnetBytes keeps.
const softnetColumns = 13

// countFields counts the space-separated fields of b.
func countFields(b []byte) int {
	n := 0
	for f, rest := nextField(b); f != nil; f, rest = nextField(rest) {
		n++
	}
	return n
}

// parseHex64 parses hex digits as strconv.ParseUint(s, 16, 64) does,
// without allocating.
func parseHex64(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		if n>>60 != 0 {
			return 0, false
		}
		n = n<<4 | uint64(d)
	}
	return n, true
}

func (f *reader) readSoftnet(g *gaps) []SoftnetStat {
	b, err := f.File(f.dir, softnetPath)
	if err != nil {
		g.add(softnetPath, err)
		return []SoftnetStat{}
	}
	s, err := parseSoftnetBytes(b)
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
func (f *reader) readRPSSockFlowEntries(g *gaps) int {
	n, err := f.num(f.dir, rpsSockFlowEntriesPath)
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
