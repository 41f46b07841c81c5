package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type fakeQueues []Device

func (f fakeQueues) Queues(context.Context) ([]Device, error) { return f, nil }

func TestTrafficStep(t *testing.T) {
	root := t.TempDir()
	stat := filepath.Join(root, "proc", "net", "softnet_stat")
	if err := os.MkdirAll(filepath.Dir(stat), 0o755); err != nil {
		t.Fatal(err)
	}
	row := func(processed string, cpu int) string {
		f := []string{processed, "00000000", "00000003"}
		for len(f) < 12 {
			f = append(f, "00000000")
		}
		return strings.Join(append(f, "0000000"+string(rune('0'+cpu))), " ")
	}
	// Row order is not CPU order: the 13th column says which CPU a row is.
	in := strings.Join([]string{row("00000010", 0), row("ffffffff", 1), row("00000000", 3), row("00000000", 2)}, "\n") + "\n"
	if err := os.WriteFile(stat, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	qs := fakeQueues{
		{Name: "eth0", Rx: []RxQueue{
			// No RPS: the NAPI thread's CPU.
			{Queue: "rx-0", RPSCPUs: "0", NAPI: &CPUs{CPUs: "1"}},
			// RPS to CPUs 2 and 3 wins over the NAPI thread.
			{Queue: "rx-1", RPSCPUs: "c", NAPI: &CPUs{CPUs: "0"}},
			// No RPS, no NAPI thread: the IRQ's CPUs.
			{Queue: "rx-2", RPSCPUs: "", IRQ: &CPUs{CPUs: "0-1"}},
		}},
		// No NAPI thread or IRQ per queue: carries no simulated traffic.
		{Name: "br-lan", Rx: []RxQueue{{Queue: "rx-0", RPSCPUs: "f"}}},
	}
	tr := Traffic{Root: root, Queues: qs, PPS: 1000}
	if err := tr.Step(context.Background(), time.Now(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(stat)
	got := []string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		got = append(got, f[0]+"@"+f[12]+"/"+f[2])
	}
	// CPU0: 16 + 1000 (rx-2 half); CPU1: 0xffffffff + 2000 + 1000, wrapped;
	// CPU2, CPU3: 1000 each from rx-1. Other columns untouched.
	want := []string{"000003f8@00000000/00000003", "00000bb7@00000001/00000003", "000003e8@00000003/00000003", "000003e8@00000002/00000003"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("softnet_stat after 2 s at 1000 pps per queue:\n got %v\nwant %v", got, want)
	}
	if err := (Traffic{Root: "/", Queues: qs, PPS: 1}).Run(context.Background()); err == nil {
		t.Error("Traffic on / ran, want a refusal")
	}
}
