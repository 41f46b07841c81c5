package tune

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
)

func TestReadCountersAndDeltas(t *testing.T) {
	root := t.TempDir()
	softnet := func(p0, p1 string) string {
		return p0 + " 00000000 00000001 0 0 0 0 0 0 00000002 0 0 00000000 0 0\n" +
			p1 + " 00000003 00000000 0 0 0 0 0 0 00000000 0 0 00000001 0 0\n"
	}
	testenv.WriteTree(t, root, map[string]string{
		"proc/net/softnet_stat": softnet("ffffff00", "00000010"),
		"proc/softirqs":         "CPU0 CPU1\nNET_RX: 100 200\n",
		"proc/stat":             "cpu 0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 5 0\ncpu1 0 0 0 0 0 0 7 0\n",
	})
	before, err := ReadCounters(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []CPUCounters{
		{CPU: 0, Processed: 0xffffff00, TimeSqueeze: 1, RPSReceived: 2, NetRX: 100, SoftirqTicks: 5},
		{CPU: 1, Processed: 16, Dropped: 3, NetRX: 200, SoftirqTicks: 7},
	}
	if !reflect.DeepEqual(before, want) {
		t.Fatalf("before = %+v\nwant %+v", before, want)
	}
	testenv.WriteTree(t, root, map[string]string{
		"proc/net/softnet_stat": softnet("00000100", "00000020"), // cpu0 wrapped
		"proc/softirqs":         "CPU0 CPU1\nNET_RX: 150 260\n",
		"proc/stat":             "cpu0 0 0 0 0 0 0 6 0\ncpu1 0 0 0 0 0 0 10 0\n",
	})
	after, err := ReadCounters(root)
	if err != nil {
		t.Fatal(err)
	}
	got := Deltas(before, after)
	wantD := []CPUDelta{
		{CPU: 0, Processed: 0x200, NetRX: 50, SoftirqMS: 10},
		{CPU: 1, Processed: 16, NetRX: 60, SoftirqMS: 30},
	}
	if !reflect.DeepEqual(got, wantD) {
		t.Errorf("deltas = %+v\nwant %+v", got, wantD)
	}
	// A missing file is an error naming it.
	if err := os.Remove(filepath.Join(root, "proc/softirqs")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCounters(root); err == nil || !strings.Contains(err.Error(), "softirqs") {
		t.Errorf("missing softirqs: err = %v", err)
	}
}

func TestReadCountersLive(t *testing.T) {
	if _, err := os.Stat("/proc/net/softnet_stat"); err != nil {
		testenv.Skipf(t, "no /proc/net/softnet_stat")
	}
	c, err := ReadCounters("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(c) == 0 {
		t.Fatal("no CPUs")
	}
}
