package vmtest

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/platform"
)

// These tests cover the harness's own parsing and checking without QEMU;
// they run in every `go test ./...`.

func TestParseConsole(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]section
		phases  []phaseLine
		done    bool
		wantErr string
	}{
		{
			name: "sections among kernel lines, CRLF",
			in: "[    1.0] virtio_net virtio0 eth0\r\n=== BEGIN plan\r\n{\"mode\": \"auto\"}\r\n=== END plan 0\r\n" +
				"noise\n=== INFO mq=eth0 sq=eth1 cpus=4\n=== BEGIN apply\nboom\n=== END apply 1\n" +
				"=== PHASE load-eth0-tx-1 eth0 tx-1 1\n=== DONE\n",
			want: map[string]section{
				"plan":  {body: "{\"mode\": \"auto\"}\n", rc: 0},
				"apply": {body: "boom\n", rc: 1},
			},
			phases: []phaseLine{{name: "load-eth0-tx-1", dev: "eth0", txq: "tx-1", cpu: 1}},
			done:   true,
		},
		{name: "unterminated", in: "=== BEGIN plan\n{\n", wantErr: "never ended"},
		{name: "nested", in: "=== BEGIN a\n=== BEGIN b\n", wantErr: "begins inside"},
		{name: "stray end", in: "=== END a 0\n", wantErr: "outside"},
		{name: "bad status", in: "=== BEGIN a\n=== END a x\n", wantErr: "bad exit status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConsole(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.sections, tt.want) || !reflect.DeepEqual(c.phases, tt.phases) || c.done != tt.done {
				t.Errorf("got %+v %+v %v, want %+v %+v %v", c.sections, c.phases, c.done, tt.want, tt.phases, tt.done)
			}
			if c.info["mq"] != "eth0" {
				t.Errorf("info = %v", c.info)
			}
			if _, err := c.get("apply"); err == nil {
				t.Error("get of a section that exited 1: no error")
			}
		})
	}
}

func TestParseDepends(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n", want: "linux-image-6.1.0-57-amd64"},
		{in: "linux-image-4kc-malta:mipsel\n  Depends: linux-image-6.1.0-50-4kc-malta:mipsel\n", want: "linux-image-6.1.0-50-4kc-malta"},
		{in: "x\n  Recommends: linux-image-1\n", wantErr: "no linux-image-"},
	}
	for _, tt := range tests {
		got, err := parseDepends(tt.in, "linux-image-")
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: got %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestModDepends(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"two", "\x7fELF...\x00license=GPL\x00depends=virtio_ring,net_failover\x00name=virtio_net\x00", []string{"virtio_ring", "net_failover"}},
		{"none", "\x00depends=\x00name=failover\x00", nil},
		{"dashes", "\x00depends=virtio-pci-modern-dev\x00", []string{"virtio_pci_modern_dev"}},
		{"not a key", "xdepends=foo\x00", nil},
		{"absent", "\x00name=x\x00", nil},
	}
	for _, tt := range tests {
		if got := modDepends([]byte(tt.in)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestParseTaskTimes(t *testing.T) {
	// A kernel thread's stat with 52 fields; utime 7, stime 5, processor 3.
	stat := "131 (napi/eth0-8193) S 2 0 0 0 -1 2129984 0 0 0 0 7 5 0 0 20 0 1 0 1234 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0"
	tests := []struct {
		name    string
		in      string
		ticks   uint64
		cpu     int
		wantErr bool
	}{
		{"napi thread", stat, 12, 3, false},
		{"comm with ') ('", strings.Replace(stat, "(napi/eth0-8193)", "(a) (b)", 1), 12, 3, false},
		{"short", "1 (x) S 2 0", 0, 0, true},
		{"no comm", "1 x S", 0, 0, true},
	}
	for _, tt := range tests {
		ticks, cpu, err := parseTaskTimes(tt.in)
		if (err != nil) != tt.wantErr || ticks != tt.ticks || cpu != tt.cpu {
			t.Errorf("%s: got %d, %d, %v; want %d, %d, error %v", tt.name, ticks, cpu, err, tt.ticks, tt.cpu, tt.wantErr)
		}
	}
}

func TestIsTxThread(t *testing.T) {
	tests := []struct {
		comm, owner string
		tx          bool
	}{
		{"napi/eth0-0", "eth0", true},
		{"napi/eth0-8193", "eth0", false},
		{"napi/eth0-257", "eth0", false},
		{"napi/br-lan-0", "br-lan", true},
		{"kworker/0:1", "", false},
	}
	for _, tt := range tests {
		if got := isTxThread(tt.comm); got != tt.tx {
			t.Errorf("isTxThread(%q) = %v", tt.comm, got)
		}
		if got := threadOwner(tt.comm); got != tt.owner {
			t.Errorf("threadOwner(%q) = %q", tt.comm, got)
		}
	}
}

func TestParseState(t *testing.T) {
	k := parseState("irq 25 0\nthread 131 napi/eth0-8193 0\nrps eth0 rx-0 0 0\nxps eth0 tx-0 1\nxps eth1 tx-0 \n" +
		"sysctl rps_sock_flow_entries 0\n 25:  1 0 0 0  PCI-MSI 32769-edge  virtio0-input.0\nbusdev eth0 virtio0\n")
	if k.irqList[25] != "0" || k.threads[131] != "0" || k.comms[131] != "napi/eth0-8193" || k.rps["eth0 rx-0"] != "0" ||
		k.xps["eth0 tx-0"] != "1" || k.xps["eth1 tx-0"] != "" || k.busdev["eth0"] != "virtio0" || k.sysctl["rps_sock_flow_entries"] != "0" {
		t.Errorf("parseState: %+v", k)
	}
}

// phaseCounters builds before/after counters for a phase in which rx-1's
// thread (pid 11, on cpu 1) and tx-1's (pid 20, on cpu 2) did the work.
func phaseCounters() (before, after counters) {
	th := func(pid int, comm string, ns uint64, cpu int) threadSample {
		return threadSample{pid: pid, comm: comm, runNS: ns, processor: cpu}
	}
	before = counters{threads: map[int]threadSample{
		10: th(10, "napi/eth0-8193", 100, 0), 11: th(11, "napi/eth0-8194", 100, 1),
		20: th(20, "napi/eth0-0", 100, 2), 21: th(21, "napi/eth0-0", 100, 3),
	}, snap: platform.Snapshot{
		Softnet: []platform.SoftnetStat{{CPU: 0, Processed: 5}, {CPU: 1, Processed: 5}},
		IRQs: []platform.IRQ{
			{Number: 25, Name: "virtio0-input.0", Counts: []uint64{1, 0}},
			{Number: 27, Name: "virtio0-input.1", Counts: []uint64{0, 1}},
			{Number: 28, Name: "virtio0-output.1", Counts: []uint64{0, 0}},
		},
	}}
	after = counters{threads: map[int]threadSample{
		10: th(10, "napi/eth0-8193", 110, 0), 11: th(11, "napi/eth0-8194", 9_000_100, 1),
		20: th(20, "napi/eth0-0", 5_000_100, 2), 21: th(21, "napi/eth0-0", 100, 3),
	}, snap: platform.Snapshot{
		Softnet: []platform.SoftnetStat{{CPU: 0, Processed: 6}, {CPU: 1, Processed: 105}},
		IRQs: []platform.IRQ{
			{Number: 25, Name: "virtio0-input.0", Counts: []uint64{1, 0}},
			{Number: 27, Name: "virtio0-input.1", Counts: []uint64{0, 9}},
			{Number: 28, Name: "virtio0-output.1", Counts: []uint64{0, 4}},
		},
	}}
	return before, after
}

func TestMeasure(t *testing.T) {
	before, after := phaseCounters()
	ph := phaseLine{name: "p", dev: "eth0", txq: "tx-1", cpu: 1}
	r, err := measure(ph, "virtio0", before, after, "sent 100 received 99 cpu 1\n")
	if err != nil {
		t.Fatal(err)
	}
	if r.rxq != 1 || r.rxIRQ != 27 || r.rxIRQCPU != 1 || r.txq != 1 || r.txIRQ != 28 || r.txIRQCPU != 1 ||
		r.rxThread.pid != 11 || r.txThread.pid != 20 || r.softnetCPU != 1 || r.softnetTotal != 101 || r.received != 99 {
		t.Errorf("measure: %+v", r)
	}
	if _, err := measure(ph, "virtio0", before, after, "garbage"); err == nil {
		t.Error("measure accepted a bad load line")
	}
}

// TestCheckPhase shows the traffic checks fail where the work ran
// elsewhere than queues/get_queues say.
func TestCheckPhase(t *testing.T) {
	before, after := phaseCounters()
	ph := phaseLine{name: "p", dev: "eth0", txq: "tx-1", cpu: 1}
	r, err := measure(ph, "virtio0", before, after, "sent 100 received 100 cpu 1")
	if err != nil {
		t.Fatal(err)
	}
	rxRight := &napiView{PID: 11, Thread: "napi/eth0-8194", placed: placed{CPUs: "1", WantCPUs: "1"}}
	txRight := &txView{Queue: "tx-1", queueWork: queueWork{NAPI: &napiView{PID: 20, Thread: "napi/eth0-0", placed: placed{CPUs: "2", WantCPUs: "2"}}}}
	tests := []struct {
		name  string
		napi  *napiView
		rps   string
		tx    *txView
		fails int
	}{
		{"all where planned", rxRight, "0", txRight, 0},
		{"rx paired with a tx thread", &napiView{PID: 21, Thread: "napi/eth0-0", placed: placed{CPUs: "0-3"}}, "0", txRight, 1},
		{"rx planned elsewhere", &napiView{PID: 11, Thread: "napi/eth0-8194", placed: placed{CPUs: "0-3", WantCPUs: "3"}}, "0", txRight, 2},
		{"rps planned elsewhere", rxRight, "1", txRight, 1},
		{"tx not paired", rxRight, "0", &txView{Queue: "tx-1"}, 1},
		{"tx planned elsewhere", rxRight, "0", &txView{Queue: "tx-1", queueWork: queueWork{NAPI: &napiView{PID: 20, Thread: "napi/eth0-0", placed: placed{WantCPUs: "0"}}}}, 1},
		{"tx paired with another thread", rxRight, "0", &txView{Queue: "tx-1", queueWork: queueWork{NAPI: &napiView{PID: 21, Thread: "napi/eth0-0", placed: placed{WantCPUs: "2"}}}}, 1},
	}
	idle := r
	idle.rxDeltaNS, idle.txDeltaNS = 0, 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &checker{}
			var row queueRow
			got := checkPhase(c, "eth0", "rx-1", "tx-1", tt.napi, nil, tt.rps, tt.tx, r, &row)
			if got != tt.fails || len(c.errs) != tt.fails {
				t.Errorf("fails = %d (%q), want %d", got, c.errs, tt.fails)
			}
		})
	}
	t.Run("no thread got CPU time", func(t *testing.T) {
		c := &checker{}
		var row queueRow
		if got := checkPhase(c, "eth0", "rx-1", "tx-1", rxRight, nil, "0", txRight, idle, &row); got != 2 {
			t.Errorf("fails = %d (%q), want 2", got, c.errs)
		}
	})
}

// TestInitScript runs shellcheck on the guest's /init.
func TestInitScript(t *testing.T) {
	testenv.NeedTool(t, "shellcheck")
	if out, err := exec.Command("shellcheck", "-s", "sh", "init.sh").CombinedOutput(); err != nil {
		t.Errorf("shellcheck init.sh: %v\n%s", err, out)
	}
}
