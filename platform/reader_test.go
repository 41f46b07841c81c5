package platform

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// A Reader gives the same snapshot as Read, call after call.
func TestReaderSameAsRead(t *testing.T) {
	for _, preset := range []string{"ipq807x", "mt7621", "x86-8-threaded"} {
		t.Run(preset, func(t *testing.T) {
			root := fixturetest.Root(t, preset, nil)
			want := readRoot(t, root)
			r := NewReader()
			for i := 0; i < 3; i++ {
				got, err := r.Read(context.Background(), root)
				if err != nil {
					t.Fatal(err)
				}
				if d := testenv.Diff(want, got); d != "" {
					t.Fatalf("call %d: Reader.Read differs from Read (-Read +Reader.Read):\n%s", i, d)
				}
			}
		})
	}
}

// A config file changed between two reads is parsed again, even when its
// size and modification time stay the same (the memo keys on contents).
func TestReaderSeesConfigChanges(t *testing.T) {
	root := fixturetest.Root(t, "ipq807x", nil)
	path := filepath.Join(root, "etc/config/network")
	stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader()
	steps := []struct {
		text     string
		want     string
		wantErrs int
	}{
		{"config globals 'globals'\n\toption packet_steering '0'\n", "0", 0},
		{"config globals 'globals'\n\toption packet_steering '0'\n", "0", 0},
		{"config globals 'globals'\n\toption packet_steering '2'\n", "2", 0},
		{"config globals 'globals'\n\toption packet_steering '2\n", "", 1},
		{"config globals 'globals'\n\toption packet_steering '2\n", "", 1},
		{"config globals 'globals'\n\toption packet_steering '1'\n", "1", 0},
	}
	for i, st := range steps {
		write(st.text)
		s, err := r.Read(context.Background(), root)
		if err != nil {
			t.Fatal(err)
		}
		if s.Config.PacketSteering != st.want || len(s.Config.Errors) != st.wantErrs {
			t.Errorf("step %d: packet_steering %q errors %+v; want %q with %d errors",
				i, s.Config.PacketSteering, s.Config.Errors, st.want, st.wantErrs)
		}
		if want := readRoot(t, root); !reflect.DeepEqual(s.Config, want.Config) {
			t.Errorf("step %d: config %+v, Read gives %+v", i, s.Config, want.Config)
		}
	}
}

// Reads of one Reader may run at once (run with -race), also reads of
// different kinds: a status call's ReadInputs beside an apply's
// ReadDecision, on a board whose IRQs are read after the parallel part
// (r4s: IRQs of devices without NAPI threads, readEffective).
func TestReaderConcurrent(t *testing.T) {
	for _, preset := range []string{"ipq807x", "r4s"} {
		t.Run(preset, func(t *testing.T) {
			root := fixturetest.Root(t, preset, nil)
			r := NewReader()
			reads := []struct {
				name string
				read func(context.Context, string) (*Snapshot, error)
			}{
				{"Read", r.Read},
				{"ReadInputs", r.ReadInputs},
				{"ReadDecision", r.ReadDecision},
			}
			wants := make([]*Snapshot, len(reads))
			for i, rd := range reads {
				s, err := rd.read(context.Background(), root)
				if err != nil {
					t.Fatal(err)
				}
				wants[i] = s
			}
			var wg sync.WaitGroup
			errs := make(chan string, 8)
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < 6; j++ {
						k := (i + j) % len(reads)
						got, err := reads[k].read(context.Background(), root)
						if err != nil {
							errs <- err.Error()
							return
						}
						if !reflect.DeepEqual(got, wants[k]) {
							errs <- reads[k].name + ": snapshot differs"
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

// A root that is not a directory is an error, as for Read.
func TestReaderBadRoot(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReader().Read(context.Background(), f); err == nil {
		t.Error("no error for a file as root")
	}
	if _, err := NewReader().Read(context.Background(), filepath.Join(f, "missing")); err == nil {
		t.Error("no error for a missing root")
	}
}

// ReadInputs is Read with the descriptive fields left zero, and never
// reports them as gaps.
func TestReadInputs(t *testing.T) {
	for _, preset := range []string{"ipq807x", "mt7621", "x86-8-threaded", "server-48"} {
		t.Run(preset, func(t *testing.T) {
			root := fixturetest.Root(t, preset, nil)
			want := readRoot(t, root)
			for i := range want.Devices {
				d := &want.Devices[i]
				d.Ifindex, d.OperState, d.Master, d.BridgePorts, d.Threaded = 0, "", "", nil, false
				for j := range d.TxQueues {
					d.TxQueues[j].XPSRxQs = ""
				}
			}
			got, err := NewReader().ReadInputs(context.Background(), root)
			if err != nil {
				t.Fatal(err)
			}
			if d := testenv.Diff(want, got); d != "" {
				t.Fatalf("ReadInputs (-want +got):\n%s", d)
			}
		})
	}
	root := fixturetest.Root(t, "ipq807x", nil)
	if err := os.Remove(filepath.Join(root, "sys/devices/virtual/net/lo/ifindex")); err != nil {
		t.Fatal(err)
	}
	s, err := NewReader().ReadInputs(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Gaps) != 0 {
		t.Errorf("gaps for a descriptive file: %+v", s.Gaps)
	}
	if full := readRoot(t, root); !hasGap(full, "sys/class/net/lo/ifindex") {
		t.Errorf("Read has no gap for the missing ifindex: %+v", full.Gaps)
	}
}

// The directory lister gives the names os.ReadDir gives, also for a
// directory that takes many getdents64 calls.
func TestDirNames(t *testing.T) {
	for _, n := range []int{0, 1, 7, 600} {
		dir := t.TempDir()
		want := []string{}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("entry-%04d-%s", i, strings.Repeat("x", i%40))
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			want = append(want, name)
		}
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		want = append(want, "sub")
		sort.Strings(want)
		r := testReader(t, dir)
		r.DentsSize = 512 // many calls
		got, err := r.names(r.dir, ".")
		r.close()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d entries: got %d names %v..., want %d", n, len(got), got[:min(3, len(got))], len(want))
		}
	}
}

// Files bigger than the reader's first buffer are read whole, by both the
// attribute and the whole-file reads.
func TestReadBigFile(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 511, 512, 4095, 4096, 4097, 70000} {
		want := strings.Repeat("0123456789abcdef", n/16+1)[:n]
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(want+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := testReader(t, dir)
		s := r.sibling() // the smaller first buffer
		got, err := s.str(s.dir, "f")
		if err != nil || got != want {
			t.Errorf("%d bytes: readString gave %d bytes, %v", n, len(got), err)
		}
		b, err := r.File(r.dir, "f")
		if err != nil || string(b) != want+"\n" {
			t.Errorf("%d bytes: readFile gave %d bytes, %v", n, len(b), err)
		}
		r.close()
	}
}

// ReadDevice reads its device as ReadDecision does, the other netdevs in
// shape only or not at all, and the threads' CPUs and IRQs' affinities of
// its device only.
func TestReadDevice(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	full, err := NewReader().ReadDecision(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	find := func(s *Snapshot, name string) *Device {
		for i := range s.Devices {
			if s.Devices[i].Name == name {
				return &s.Devices[i]
			}
		}
		return nil
	}
	tests := []struct {
		name   string
		dev    string
		others bool // what the scope's Others answers
		want   []string
	}{
		{"others in shape", "eth0", true, []string{"br-lan", "eth0", "lan1", "lan2", "lan3", "lan4", "lo", "wan", "wlan0"}},
		{"no others", "eth0", false, []string{"eth0"}},
		{"no such device", "eth9", false, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen *Device
			asked := false
			got, err := NewReader().ReadDevice(ctx, root, DeviceScope{Device: tt.dev, Others: func(cfg *Config, d *Device) bool {
				asked, seen = true, d
				return tt.others
			}})
			if err != nil {
				t.Fatal(err)
			}
			if !asked {
				t.Fatal("Others not asked")
			}
			var names []string
			for _, d := range got.Devices {
				names = append(names, d.Name)
			}
			if names == nil {
				names = []string{}
			}
			if d := testenv.Diff(tt.want, names); d != "" {
				t.Fatalf("netdevs read (-want +got):\n%s", d)
			}
			want := find(full, tt.dev)
			if (seen == nil) != (want == nil) || (seen != nil && seen.Driver != want.Driver) {
				t.Errorf("Others saw %+v, want the device as read (driver %v)", seen, want)
			}
			if want != nil {
				if d := testenv.Diff(*want, *find(got, tt.dev)); d != "" {
					t.Errorf("%s differs from ReadDecision's (-ReadDecision +ReadDevice):\n%s", tt.dev, d)
				}
			}
			for _, d := range got.Devices {
				if d.Name == tt.dev {
					continue
				}
				if fd := find(full, d.Name); fd.Kind != d.Kind || fd.BusDevice != d.BusDevice || fd.Driver != d.Driver || len(fd.RxQueues) != len(d.RxQueues) {
					t.Errorf("%s: shape differs from ReadDecision's: %+v, want %+v", d.Name, d, *fd)
				}
				for _, q := range d.RxQueues {
					if q.RPSCPUs != "" || q.RPSFlowCnt != 0 {
						t.Errorf("%s %s: knob read (%q, %d)", d.Name, q.Name, q.RPSCPUs, q.RPSFlowCnt)
					}
				}
			}
			for _, th := range got.NAPIThreads {
				if (th.CPUs != "") != (th.Device == tt.dev) {
					t.Errorf("thread %s (device %q): CPUs %q", th.Name, th.Device, th.CPUs)
				}
			}
			for _, q := range got.IRQs {
				if (q.SMPAffinity != "") != (q.Device == tt.dev) {
					t.Errorf("IRQ %d (device %q): affinity %q", q.Number, q.Device, q.SMPAffinity)
				}
			}
			if got.RPSSockFlowEntries != -1 {
				t.Errorf("RPSSockFlowEntries = %d, want -1 (not read)", got.RPSSockFlowEntries)
			}
		})
	}
}

// testReader is a reader of the file system at dir, as a Read makes it.
func testReader(t *testing.T, dir string) *reader {
	t.Helper()
	f, err := NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.newReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
