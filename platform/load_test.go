package platform

import (
	"context"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseCPUTimes(t *testing.T) {
	tests := []struct {
		name, in string
		want     []CPUTime
		err      bool
	}{
		{name: "two cpus", in: "cpu  10 0 10 10 0 0 2 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 10 0 20 30 1 0 4 0 0 0\nintr 1 2\n",
			want: []CPUTime{{CPU: 0, Total: 36, Idle: 9, Softirq: 7}, {CPU: 1, Total: 65, Idle: 31, Softirq: 4}}},
		{name: "old kernel, seven columns", in: "cpu0 1 1 1 1 1 1 5\n", want: []CPUTime{{CPU: 0, Total: 11, Idle: 2, Softirq: 5}}},
		{name: "short row", in: "cpu0 1 2 3\n", err: true},
		{name: "bad number", in: "cpu0 1 2 x 4 5 6 7 8\n", err: true},
		{name: "bad cpu", in: "cpuX 1 2 3 4 5 6 7 8\n", err: true},
		{name: "no rows", in: "intr 5\n", err: true},
	}
	for _, tc := range tests {
		got, err := ParseCPUTimes([]byte(tc.in))
		if (err != nil) != tc.err {
			t.Errorf("%s: err %v, want error %v", tc.name, err, tc.err)
			continue
		}
		if !tc.err && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseSoftirqRow(t *testing.T) {
	const good = "                    CPU0       CPU1       CPU3\n          HI:          0          0 0\n      NET_RX:     466393     352688 7\n"
	tests := []struct {
		name, in string
		want     map[int]uint64
		err      bool
	}{
		{name: "offline cpu2 has no column", in: good, want: map[int]uint64{0: 466393, 1: 352688, 3: 7}},
		{name: "no row", in: "   CPU0\n  HI: 1\n", err: true},
		{name: "short row", in: "   CPU0 CPU1\n NET_RX: 1\n", err: true},
		{name: "bad header", in: "   CPUa\n NET_RX: 1\n", err: true},
		{name: "bad number", in: "   CPU0\n NET_RX: -1\n", err: true},
	}
	for _, tc := range tests {
		got, err := ParseSoftirqRow([]byte(tc.in), "NET_RX")
		if (err != nil) != tc.err {
			t.Errorf("%s: err %v, want error %v", tc.name, err, tc.err)
			continue
		}
		if !tc.err && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseTaskTicks(t *testing.T) {
	tests := []struct {
		name, in string
		want     uint64
		err      bool
	}{
		{name: "napi thread", in: "300 (napi/eth0-257) S 2 0 0 0 -1 2129984 0 0 0 0 17 25 0 0 20 0 1 0 9 0 0", want: 42},
		{name: "name with ') ' inside", in: "7 (a) b) c) R 1 1 1 0 -1 0 0 0 0 0 3 4 0 0", want: 7},
		{name: "truncated", in: "7 (x) S 1 1 1 0 -1 0 0 0 0", err: true},
		{name: "no comm", in: "7 x S", err: true},
		{name: "bad time", in: "7 (x) S 1 1 1 0 -1 0 0 0 0 0 x 4", err: true},
	}
	for _, tc := range tests {
		got, err := ParseTaskTicks([]byte(tc.in))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestReadLoad(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"proc/net/softnet_stat": "00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000003 00000000 00000000 00000000\n",
		"proc/stat":             "cpu0 1 0 1 5 0 0 2 0\n",
		"proc/softirqs":         "  CPU0\n NET_RX: 9\n",
		"proc/300/stat":         "300 (napi/eth0-1) S 2 0 0 0 -1 2129984 0 0 0 0 5 6 0 0",
		"proc/300/schedstat":    "123456 7890 12\n",
	}
	testenv.WriteTree(t, root, files)
	lc, err := ReadLoad(context.Background(), root, []int{300, 301})
	if err != nil {
		t.Fatal(err)
	}
	if len(lc.Softnet) != 1 || lc.Softnet[0].Processed != 16 || lc.Softnet[0].TimeSqueeze != 2 {
		t.Errorf("softnet %+v", lc.Softnet)
	}
	if !reflect.DeepEqual(lc.CPUs, []CPUTime{{CPU: 0, Total: 9, Idle: 5, Softirq: 2}}) || lc.NetRX[0] != 9 {
		t.Errorf("cpus %+v net_rx %v", lc.CPUs, lc.NetRX)
	}
	// pid 301 does not exist: left out, not an error.
	if !reflect.DeepEqual(lc.Threads, []ThreadTime{{PID: 300, Ticks: 11, WaitNS: 7890, HasWait: true}}) {
		t.Errorf("threads %+v", lc.Threads)
	}
	if err := os.Remove(filepath.Join(root, "proc/softirqs")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLoad(context.Background(), root, nil); err == nil {
		t.Error("no error without proc/softirqs")
	}
}

func TestParseSchedWait(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"123 456 7\n", 456, true},
		{"123 456\n", 0, false},
		{"a 456 7", 0, false},
		{"1 x 7", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		got, ok := ParseSchedWait([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

const softirqsFixture = `                    CPU0       CPU2
          HI:          0          0
      NET_TX:          5          1
      NET_RX:       3059       3087
`

func TestParseSoftirqRowNetRX(t *testing.T) {
	got, err := ParseSoftirqRow([]byte(softirqsFixture), "NET_RX")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]uint64{0: 3059, 2: 3087}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for name, in := range map[string]string{
		"no row":       "CPU0\nHI: 1\n",
		"bad header":   "FOO0\nNET_RX: 1\n",
		"column count": "CPU0 CPU1\nNET_RX: 1\n",
		"bad number":   "CPU0\nNET_RX: x\n",
		"empty":        "",
	} {
		if _, err := ParseSoftirqRow([]byte(in), "NET_RX"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

const statFixture = `cpu  4418 0 1198 68473 240 0 55 5 0 0
cpu0 2498 0 632 33857 186 0 17 2 0 0
cpu1 1920 0 565 34615 53 0 38 2 0 0
intr 1 2 3
softirq 10 0 1 2
`

// The softirq column of each cpuN row (tune's counters read it).
func TestParseCPUTimesSoftirq(t *testing.T) {
	ts, err := ParseCPUTimes([]byte(statFixture))
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]uint64{}
	for _, c := range ts {
		got[c.CPU] = c.Softirq
	}
	if want := map[int]uint64{0: 17, 1: 38}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for name, in := range map[string]string{
		"no cpu lines": "intr 1\n",
		"short line":   "cpu0 1 2 3\n",
		"bad value":    "cpu0 1 2 3 4 5 6 x 8\n",
		"bad cpu":      "cpuX 1 2 3 4 5 6 7 8\n",
	} {
		if _, err := ParseCPUTimes([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
