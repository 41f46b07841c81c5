package steering

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"golang.org/x/sys/unix"
)

// fakeNetlink is the kernel's per-NAPI state for an engine on a fixture
// root: a Writer (files through FSWriter) with NAPIWriter, and the reader
// that adds what napi-get would say to each snapshot.
type fakeNetlink struct {
	*FSWriter
	kernel string // "6.12", "6.13", "6.17"
	mu     sync.Mutex
	napis  map[int]string            // NAPI id -> device
	vals   map[int]map[string]uint64 // NAPI id -> knob -> value
	// failSet: "ID knob" -> the error of its next write; ignore: writes
	// of "ID knob" are acked and not kept (a kernel that does not take
	// the value).
	failSet map[string]error
	ignore  map[string]bool
	writes  []string // "ID knob=value"
}

func newFakeNetlink(root, kernel string, napis map[int]string) *fakeNetlink {
	f := &fakeNetlink{FSWriter: NewFSWriter(root), kernel: kernel, napis: napis, vals: map[int]map[string]uint64{},
		failSet: map[string]error{}, ignore: map[string]bool{}}
	for id := range napis {
		f.vals[id] = map[string]uint64{platform.NAPIKnobDeferHardIRQs: 0, platform.NAPIKnobGROFlushTimeout: 0, platform.NAPIKnobThreaded: 0}
	}
	return f
}

func (f *fakeNetlink) has(knob string) bool {
	return f.kernel != "6.12" && (knob != platform.NAPIKnobThreaded || f.kernel == "6.17")
}

func (f *fakeNetlink) NAPIKnob(id int, knob string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.has(knob) {
		return "", platform.ErrNAPIKnobsUnsupported
	}
	v, ok := f.vals[id]
	if !ok {
		return "", fmt.Errorf("napi %d: %w", id, unix.ENOENT)
	}
	return strconv.FormatUint(v[knob], 10), nil
}

func (f *fakeNetlink) SetNAPIKnob(id int, knob, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := fmt.Sprintf("%d %s", id, knob)
	if err := f.failSet[key]; err != nil {
		delete(f.failSet, key)
		return err
	}
	if !f.has(knob) {
		return platform.ErrNAPIKnobsUnsupported
	}
	n, err := strconv.ParseUint(value, 10, 64)
	if err != nil {
		return unix.EINVAL
	}
	f.writes = append(f.writes, key+"="+value)
	if !f.ignore[key] {
		f.vals[id][knob] = n
	}
	return nil
}

// read is the engine's reader: the fixture, and netlink as this kernel
// would answer.
func (f *fakeNetlink) read(ctx context.Context, root string) (*platform.Snapshot, error) {
	s, err := platform.Read(ctx, root)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	nl := &platform.NetlinkInfo{Status: "ok", Ops: []string{"queue-get", "napi-get", "qstats-get"}}
	if f.kernel != "6.12" {
		nl.Ops = append(nl.Ops, "napi-set")
	}
	ids := make([]int, 0, len(f.napis))
	for id := range f.napis {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		n := platform.NAPI{ID: id, Device: f.napis[id], IRQ: -1}
		v := f.vals[id]
		if f.has(platform.NAPIKnobDeferHardIRQs) {
			d, g := uint32(v[platform.NAPIKnobDeferHardIRQs]), v[platform.NAPIKnobGROFlushTimeout]
			n.DeferHardIRQs, n.GROFlushTimeoutNS = &d, &g
		}
		if f.has(platform.NAPIKnobThreaded) {
			th := uint32(v[platform.NAPIKnobThreaded])
			n.Threaded = &th
		}
		nl.NAPIs = append(nl.NAPIs, n)
	}
	s.Netlink = nl
	return s, nil
}

func (f *fakeNetlink) state() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := 8193; id <= 8196; id++ {
		v := f.vals[id]
		out = append(out, fmt.Sprintf("%d:%d/%d/%d", id, v[platform.NAPIKnobDeferHardIRQs], v[platform.NAPIKnobGROFlushTimeout], v[platform.NAPIKnobThreaded]))
	}
	return strings.Join(out, " ")
}

// napiEngine is an engine on the virtio-4q fixture (eth0: NAPIs
// 8193-8196 with threads, eth1: 8197) with the config text and the fake
// kernel.
func napiEngine(t *testing.T, kernel, conf string) (*Engine, *fakeNetlink, string) {
	t.Helper()
	root := fixturetest.Root(t, "virtio-4q", nil)
	for file, v := range map[string]string{"napi_defer_hard_irqs": "0", "gro_flush_timeout": "0", "threaded": "1"} {
		if err := os.WriteFile(filepath.Join(root, "sys/class/net/eth0", file), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setConf(t, root, conf)
	f := newFakeNetlink(root, kernel, map[int]string{8193: "eth0", 8194: "eth0", 8195: "eth0", 8196: "eth0", 8197: "eth1"})
	return NewEngine(root, WithWriter(f), WithReader(f.read)), f, root
}

func setConf(t *testing.T, root, conf string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, "etc/config/packet_steering"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

const napiConf = `config globals 'globals'
	option mode 'custom'

config device
	option name 'eth0'
	option defer_hard_irqs '2'
	option gro_flush_timeout '20000'
	list queue_gro_flush_timeout 'rx-3=200000'
	list queue_napi_threaded 'rx-1=1'
`

func napiChanged(res *Result) []string {
	var out []string
	for _, a := range res.Changed {
		if plan.IsNAPIKnob(a.Kind) {
			out = append(out, string(a.Kind)+" "+strconv.Itoa(a.NAPIID)+"="+a.Value)
		}
	}
	sort.Strings(out)
	return out
}

func TestEngineNAPIKnobsApplyRelease(t *testing.T) {
	ctx := context.Background()
	e, f, _ := napiEngine(t, "6.17", napiConf)
	res, err := e.Apply(ctx, ApplyRequest{Reason: "test"})
	if err != nil || len(res.Failed) != 0 {
		t.Fatalf("apply: %v %+v", err, res)
	}
	if got, want := f.state(), "8193:2/20000/0 8194:2/20000/1 8195:2/20000/0 8196:2/200000/0"; got != want {
		t.Errorf("kernel after apply: %s, want %s", got, want)
	}
	if n := len(napiChanged(res)); n != 9 {
		t.Errorf("%d per-NAPI changes, want 9: %v", n, napiChanged(res))
	}
	if v := f.vals[8197][platform.NAPIKnobDeferHardIRQs]; v != 0 {
		t.Errorf("eth1's NAPI written: %d", v)
	}
	// A second apply writes nothing; status is in sync, get_queues shows
	// the live and wanted values.
	n := len(f.writes)
	res, err = e.Apply(ctx, ApplyRequest{Reason: "again"})
	if err != nil || len(napiChanged(res)) != 0 || len(f.writes) != n {
		t.Errorf("second apply: %v %v, writes %v", err, napiChanged(res), f.writes[n:])
	}
	st, err := e.Status(ctx)
	if err != nil || !st.InSync {
		t.Errorf("status: %v in sync %v", err, st != nil && st.InSync)
	}
	qs, err := e.Queues(ctx, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	k := qs[0].Rx[3].NAPIKnobs
	if k == nil || k.NAPIID != 8196 || k.GROFlushTimeoutNS != "200000" || k.WantGROFlushTimeoutNS != "200000" ||
		k.DeferHardIRQs != "2" || k.Threaded != "0" || k.WantThreaded != "" {
		t.Errorf("get_queues rx-3 napi knobs %+v", k)
	}
	if k := qs[0].Rx[1].NAPIKnobs; k == nil || k.WantThreaded != "1" || k.Threaded != "1" {
		t.Errorf("get_queues rx-1 napi knobs %+v", k)
	}
	// Release: every knob the plan set back to the device's defaults
	// (its sysfs files: defer 0, timeout 0, threaded 1); threaded only
	// where custom set it.
	res, err = e.Release(ctx, false)
	if err != nil || len(res.Failed) != 0 {
		t.Fatalf("release: %v %+v", err, res)
	}
	if got, want := f.state(), "8193:0/0/0 8194:0/0/1 8195:0/0/0 8196:0/0/0"; got != want {
		t.Errorf("kernel after release: %s, want %s", got, want)
	}
}

func TestEngineNAPIKnobsRollback(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		fault func(f *fakeNetlink)
		err   string
	}{
		{"write refused", func(f *fakeNetlink) { f.failSet["8195 gro-flush-timeout"] = unix.EINVAL }, "invalid argument"},
		{"not held on read back", func(f *fakeNetlink) { f.ignore["8196 defer-hard-irqs"] = true }, "verify: wrote 2, the kernel holds 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, f, _ := napiEngine(t, "6.13", strings.ReplaceAll(napiConf, "\tlist queue_napi_threaded 'rx-1=1'\n", ""))
			tc.fault(f)
			res, err := e.Apply(ctx, ApplyRequest{Reason: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Error, tc.err) || !plan.IsNAPIKnob(res.Failed[0].Action.Kind) {
				t.Fatalf("failed %+v, want one per-NAPI failure with %q", res.Failed, tc.err)
			}
			if got, want := f.state(), "8193:0/0/0 8194:0/0/0 8195:0/0/0 8196:0/0/0"; got != want {
				t.Errorf("kernel after the failed apply: %s, want it rolled back to %s", got, want)
			}
			rolled := 0
			for _, s := range res.Skipped {
				if strings.HasPrefix(s.Reason, "rolled back") && plan.IsNAPIKnob(s.Action.Kind) {
					rolled++
				}
			}
			if rolled == 0 {
				t.Errorf("no per-NAPI knob reported rolled back: %+v", res.Skipped)
			}
		})
	}
}

func TestEngineNAPIKnobsUnsupported(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ kernel, hint string }{
		{"6.12", "not supported by this kernel: netlink napi-set needs Linux 6.13"},
		{"6.13", "not supported by this kernel: per-NAPI threaded needs Linux 6.17"},
	} {
		t.Run(tc.kernel, func(t *testing.T) {
			e, f, _ := napiEngine(t, tc.kernel, "config globals 'globals'\n\toption mode 'custom'\n\nconfig device\n\toption name 'eth0'\n\toption napi_threaded '1'\n\toption defer_hard_irqs '1'\n")
			res, err := e.Apply(ctx, ApplyRequest{Reason: "test"})
			if err != nil || len(res.Failed) != 0 {
				t.Fatalf("apply: %v %+v", err, res)
			}
			for _, w := range f.writes {
				if strings.Contains(w, "threaded") || tc.kernel == "6.12" {
					t.Errorf("written on a kernel without it: %s", w)
				}
			}
			st, err := e.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, h := range st.Hints {
				found = found || h.ID == plan.HintNAPIKnobsUnsupported && strings.Contains(h.Text, tc.hint)
			}
			if !found {
				t.Errorf("status hints %+v, want %s with %q", st.Hints, plan.HintNAPIKnobsUnsupported, tc.hint)
			}
		})
	}
}

func TestNAPIKnobsWithoutNetlinkWriter(t *testing.T) {
	// A Writer without NAPIWriter (and FSWriter below a fixture root)
	// cannot write per-NAPI knobs: a clear failure, nothing else of the
	// device written.
	snap := &platform.Snapshot{Devices: []platform.Device{{Name: "eth0"}},
		Netlink: &platform.NetlinkInfo{NAPIs: []platform.NAPI{{ID: 9, Device: "eth0"}}}}
	act := []plan.Action{{Kind: plan.KindNAPIDeferHardIRQs, Device: "eth0", NAPIID: 9, Value: "2", Current: "0"}}
	for _, w := range []Writer{newMemWriter(), NewFSWriter(t.TempDir())} {
		res := ApplyPlan(context.Background(), w, snap, act, false)
		if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Error, "not supported by this kernel") {
			t.Errorf("%T: %+v", w, res.Failed)
		}
	}
	// Names checked against the snapshot: a NAPI of another device, an
	// unknown id, a value out of range.
	for _, a := range []plan.Action{
		{Kind: plan.KindNAPIDeferHardIRQs, Device: "eth1", NAPIID: 9, Value: "2"},
		{Kind: plan.KindNAPIGROFlushTimeout, Device: "eth0", NAPIID: 10, Value: "2"},
		{Kind: plan.KindNAPIThreaded, Device: "eth0", NAPIID: 9, Value: "2"},
	} {
		if _, err := newKnobIndex(snap).resolveKnob(a); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", a, err)
		}
	}
}
