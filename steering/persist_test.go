package steering

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/internal/uci"
	"github.com/packet-steering/packet-steering/plan"
)

const networkConfig = `
config interface 'loopback'
	option device 'lo'
	option proto 'static'

config globals 'globals'
	option ula_prefix 'fd00:1::/48'
	option packet_steering '1'

config device
	option name 'br-lan'
	option type 'bridge'
`

// configRoot returns a root holding only etc/config files.
func configRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	m := map[string]string{}
	for name, content := range files {
		m["etc/config/"+name] = content
	}
	testenv.WriteTree(t, root, m)
	if err := os.MkdirAll(filepath.Join(root, "etc/config"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

func loadUCI(t *testing.T, root, name string) *uci.Package {
	t.Helper()
	p, err := uci.Load(filepath.Join(root, "etc/config"), name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return p
}

func TestSetModePersistRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name        string
		files       map[string]string
		mode        plan.Mode
		flows       int
		wantNetwork string
	}{
		{"off over stock network", map[string]string{"network": networkConfig}, plan.ModeOff, 0, "0"},
		{"all with flows", map[string]string{"network": networkConfig}, plan.ModeAll, 256, "2"},
		{"legacy", map[string]string{"network": networkConfig}, plan.ModeLegacy, 0, "1"},
		{"auto", map[string]string{"network": networkConfig}, plan.ModeAuto, 128, "1"},
		{"custom keeps device sections", map[string]string{"network": networkConfig,
			"packet_steering": "config globals 'globals'\n\toption mode 'auto'\n\nconfig device\n\toption name 'eth0'\n\toption rps_cpus '2'\n"},
			plan.ModeCustom, 64, "1"},
		{"no network globals section", map[string]string{"network": "config interface 'lan'\n\toption proto 'static'\n"}, plan.ModeOff, 0, "0"},
		{"no config files at all", nil, plan.ModeAll, 32, "2"},
		{"anonymous globals sections", map[string]string{"network": "config globals\n\toption packet_steering '0'\n",
			"packet_steering": "config globals\n\toption mode 'off'\n"}, plan.ModeLegacy, 0, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := configRoot(t, tc.files)
			e := NewEngine(root)
			if _, err := e.SetMode(context.Background(), SetModeRequest{Mode: tc.mode, Flows: intp(tc.flows), Persist: true}); err != nil {
				t.Fatal(err)
			}
			ps := loadUCI(t, root, "packet_steering")
			g := ps.SectionsOfType("globals")
			if len(g) != 1 {
				t.Fatalf("%d globals sections in packet_steering", len(g))
			}
			if m, _ := g[0].Get("mode"); m != string(tc.mode) {
				t.Errorf("packet_steering mode %q, want %q", m, tc.mode)
			}
			if f, _ := g[0].Get("flows"); f != strconv.Itoa(tc.flows) {
				t.Errorf("packet_steering flows %q, want %d", f, tc.flows)
			}
			net := loadUCI(t, root, "network")
			ng := net.SectionsOfType("globals")
			if len(ng) != 1 {
				t.Fatalf("%d globals sections in network", len(ng))
			}
			if v, _ := ng[0].Get("packet_steering"); v != tc.wantNetwork {
				t.Errorf("network packet_steering %q, want %q", v, tc.wantNetwork)
			}
			if v, _ := ng[0].Get("steering_flows"); v != strconv.Itoa(tc.flows) {
				t.Errorf("network steering_flows %q, want %d", v, tc.flows)
			}
			if strings.Contains(tc.files["network"], "ula_prefix") {
				if v, _ := ng[0].Get("ula_prefix"); v != "fd00:1::/48" {
					t.Errorf("other network options lost: ula_prefix %q", v)
				}
				if len(net.SectionsOfType("interface")) != 1 || len(net.SectionsOfType("device")) != 1 {
					t.Errorf("other network sections lost")
				}
			}
			if strings.Contains(tc.files["packet_steering"], "config device") && len(ps.SectionsOfType("device")) != 1 {
				t.Errorf("device sections lost")
			}
			// A restarted engine resolves the same settings from disk.
			st, err := NewEngine(root).Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := plan.Settings{Mode: tc.mode, Flows: tc.flows, Source: plan.SourcePacketSteering}
			if st.Configured != want {
				t.Errorf("after restart configured = %+v, want %+v", st.Configured, want)
			}
		})
	}
}

func readAllFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			out[strings.TrimPrefix(p, dir)] = string(b)
		}
		return nil
	})
	return out
}

func TestSetModeLiveAndInvalid(t *testing.T) {
	root := configRoot(t, map[string]string{"network": networkConfig})
	before := readAllFiles(t, root)
	e := NewEngine(root)
	ctx := context.Background()

	for _, req := range []SetModeRequest{
		{Mode: "turbo", Persist: true},
		{Mode: "", Persist: true},
		{Mode: plan.ModeAuto, Flows: intp(-1), Persist: true},
		{Mode: plan.ModeAuto, Flows: intp(plan.MaxFlows + 1), Persist: true},
		{Mode: plan.ModeAuto, Flows: intp(math.MaxInt32)},
	} {
		if _, err := e.SetMode(ctx, req); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("SetMode(%+v) = %v, want ErrInvalid", req, err)
		}
	}
	if after := readAllFiles(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("invalid requests wrote files:\nbefore %v\nafter  %v", before, after)
	}

	// Without persist: live only, files untouched, gone after a restart.
	res, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeOff, Flows: intp(0)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != plan.ModeOff {
		t.Errorf("result mode %q, want off", res.Mode)
	}
	st, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Configured != (plan.Settings{Mode: plan.ModeOff, Source: plan.SourceLive}) || st.Mode != plan.ModeOff {
		t.Errorf("live status %+v / %s, want off from live", st.Configured, st.Mode)
	}
	if st.LastApply == nil || !strings.Contains(st.LastApply.Reason, "off") {
		t.Errorf("last apply %+v, want the set_mode apply", st.LastApply)
	}
	for name, content := range readAllFiles(t, filepath.Join(root, "etc")) {
		if before["/etc"+name] != content {
			t.Errorf("live set_mode changed %s", name)
		}
	}
	st, _ = NewEngine(root).Status(ctx)
	if st.Configured.Mode != plan.ModeAuto || st.Configured.Source != plan.SourceNetwork {
		t.Errorf("after restart %+v, want auto from network", st.Configured)
	}
	// Flows nil keeps the flows in force.
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAll, Flows: intp(512)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeLegacy}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.Status(ctx); st.Configured != (plan.Settings{Mode: plan.ModeLegacy, Flows: 512, Source: plan.SourceLive}) {
		t.Errorf("flows not kept: %+v", st.Configured)
	}
	// A persisted set_mode ends the live override.
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAll, Persist: true}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.Status(ctx); st.Configured != (plan.Settings{Mode: plan.ModeAll, Flows: 512, Source: plan.SourcePacketSteering}) {
		t.Errorf("after persist: %+v", st.Configured)
	}
}

// makeReadOnly makes dir refuse new files, also for root (who ignores
// permission bits) by the immutable attribute; it skips the test when
// neither works here.
func makeReadOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	if _, err := exec.LookPath("chattr"); err != nil {
		testenv.Skipf(t, "needs chattr to make a directory read-only for root")
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		testenv.Skipf(t, "chattr +i not supported here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	if f, err := os.CreateTemp(dir, "probe"); err == nil {
		f.Close()
		os.Remove(f.Name())
		testenv.Skipf(t, "immutable directory still accepts files")
	}
}

func TestSetModeReadOnlyConfigDir(t *testing.T) {
	root := configRoot(t, map[string]string{"network": networkConfig})
	testenv.WriteTree(t, root, map[string]string{"var/lock/.keep": ""})
	e := NewEngine(root)
	ctx := context.Background()
	before, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	makeReadOnly(t, filepath.Join(root, "etc/config"))
	filesBefore := readAllFiles(t, filepath.Join(root, "etc"))

	_, err = e.SetMode(ctx, SetModeRequest{Mode: plan.ModeOff, Flows: intp(0), Persist: true})
	if err == nil || errors.Is(err, plan.ErrInvalid) {
		t.Fatalf("SetMode on a read-only config dir: %v, want a write error", err)
	}
	if !strings.Contains(err.Error(), "packet_steering") {
		t.Errorf("error %q does not say which file", err)
	}
	after, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Configured != before.Configured || after.LastApply != nil {
		t.Errorf("live state changed: %+v -> %+v, last apply %+v", before.Configured, after.Configured, after.LastApply)
	}
	if got := readAllFiles(t, filepath.Join(root, "etc")); fmt.Sprint(got) != fmt.Sprint(filesBefore) {
		t.Errorf("config files changed:\n%v\n%v", filesBefore, got)
	}
}

func TestCorruptConfigKeepsLastGood(t *testing.T) {
	good := "config globals 'globals'\n\toption mode 'legacy'\n\toption flows '64'\n"
	root := configRoot(t, map[string]string{"network": networkConfig, "packet_steering": good})
	e := NewEngine(root)
	ctx := context.Background()
	st, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := plan.Settings{Mode: plan.ModeLegacy, Flows: 64, Source: plan.SourcePacketSteering}
	if st.Configured != want || len(st.ConfigErrors) != 0 {
		t.Fatalf("good config: %+v, errors %v", st.Configured, st.ConfigErrors)
	}

	corrupt := "config globals 'globals'\n\toption mode 'off\n" // unterminated quote
	path := filepath.Join(root, "etc/config/packet_steering")
	if err := os.WriteFile(path, []byte(corrupt), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err = e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Configured != want {
		t.Errorf("corrupt config: configured %+v, want the last good %+v", st.Configured, want)
	}
	if len(st.ConfigErrors) != 1 || st.ConfigErrors[0].Path != "etc/config/packet_steering" {
		t.Errorf("config errors %+v, want the packet_steering parse error", st.ConfigErrors)
	}
	res, err := e.Apply(ctx, ApplyRequest{Reason: "test"})
	if err != nil || res.Mode != plan.ModeLegacy {
		t.Errorf("apply with a corrupt file: %v, mode %v; want the last good legacy", err, res)
	}
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAll, Persist: true}); err == nil {
		t.Errorf("set_mode persisted over a corrupt file")
	}
	if b, _ := os.ReadFile(path); string(b) != corrupt {
		t.Errorf("corrupt file rewritten:\n%s", b)
	}

	// An engine that never saw a good config reports the error and runs
	// the default.
	st, err = NewEngine(root).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ConfigErrors) != 1 || st.Configured.Source == plan.SourcePacketSteering {
		t.Errorf("fresh engine on a corrupt file: %+v, errors %v", st.Configured, st.ConfigErrors)
	}
}

// uciHelperEnv marks the re-executed test binary as a concurrent UCI writer;
// its value is the config dir.
const uciHelperEnv = "STEERING_UCI_HELPER_DIR"

// uciWriterHelper is another process changing packet_steering while
// TestSetModeRace runs (see TestMain).
func uciWriterHelper() error {
	dir := os.Getenv(uciHelperEnv)
	for i := 0; i < 40; i++ {
		err := uci.Update(dir, "packet_steering", func(p *uci.Package) error {
			s := p.Section("@device[0]")
			if s == nil {
				var err error
				if s, err = p.AddSection("device", ""); err != nil {
					return err
				}
			}
			if err := p.Set(s.Name, "name", "eth0"); err != nil {
				return err
			}
			return p.Set(s.Name, "rps_cpus", strconv.FormatInt(int64(i%15+1), 16))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func TestSetModeRace(t *testing.T) {
	for round := 0; round < 5; round++ {
		root := configRoot(t, map[string]string{"network": networkConfig})
		dir := filepath.Join(root, "etc/config")
		helper, err := testenv.HelperCommand("uci-writer", uciHelperEnv+"="+dir)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		helper.Stdout, helper.Stderr = &out, &out
		if err := helper.Start(); err != nil {
			t.Fatal(err)
		}
		reqs := []SetModeRequest{
			{Mode: plan.ModeOff, Flows: intp(0), Persist: true},
			{Mode: plan.ModeAll, Flows: intp(4096), Persist: true},
		}
		var wg sync.WaitGroup
		errs := make([]error, len(reqs))
		for i, r := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Separate engines: only the file locks order them.
				for j := 0; j < 5 && errs[i] == nil; j++ {
					_, errs[i] = NewEngine(root).SetMode(context.Background(), r)
				}
			}()
		}
		wg.Wait()
		if err := helper.Wait(); err != nil {
			t.Fatalf("helper: %v\n%s", err, out.String())
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		ps := loadUCI(t, root, "packet_steering")
		net := loadUCI(t, root, "network")
		mode, _ := ps.Get("globals", "mode")
		flows, _ := ps.Get("globals", "flows")
		nv, _ := net.Get("@globals[0]", "packet_steering")
		nf, _ := net.Get("@globals[0]", "steering_flows")
		got := mode + "/" + flows + "/" + nv + "/" + nf
		if got != "off/0/0/0" && got != "all/4096/2/4096" {
			t.Fatalf("round %d: final state %s is not one of the requests", round, got)
		}
		if len(ps.SectionsOfType("globals")) != 1 || len(ps.SectionsOfType("device")) != 1 {
			t.Fatalf("round %d: sections %d globals, %d device", round, len(ps.SectionsOfType("globals")), len(ps.SectionsOfType("device")))
		}
		// The helper's last write (round 39: 39%15+1 = 10) must survive.
		if v, _ := ps.Get("@device[0]", "rps_cpus"); v != "a" {
			t.Fatalf("round %d: helper's last write lost: rps_cpus %q", round, v)
		}
	}
}

// diskFullEnv marks the re-executed test binary as the disk-full child; its
// value is the directory to mount a tiny tmpfs on.
const diskFullEnv = "STEERING_DISK_FULL_DIR"

// TestSetModeDiskFull fills a config directory's file system and checks that
// a persisting set_mode fails clearly and changes nothing. It runs in a child
// process with a private mount namespace holding a 64 KiB tmpfs.
func TestSetModeDiskFull(t *testing.T) {
	if dir := os.Getenv(diskFullEnv); dir != "" {
		diskFullChild(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		testenv.Skipf(t, "needs root for a private mount namespace")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := testenv.Command(exe, "-test.run", "^TestSetModeDiskFull$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), diskFullEnv+"="+dir)
	// Go makes the new mount namespace private before exec, so the tmpfs
	// never shows outside the child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestSetModeDiskFull") {
		t.Fatalf("child did not pass:\n%s", out)
	}
}

func diskFullChild(t *testing.T, root string) {
	if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "size=64k"); err != nil {
		testenv.Skipf(t, "mount tmpfs: %v", err)
	}
	testenv.WriteTree(t, root, map[string]string{
		"etc/config/network": networkConfig,
		"var/lock/.keep":     "",
	})
	e := NewEngine(root)
	ctx := context.Background()
	before, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Fill the file system.
	f, err := os.Create(filepath.Join(root, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	files := readAllFiles(t, filepath.Join(root, "etc"))
	_, err = e.SetMode(ctx, SetModeRequest{Mode: plan.ModeOff, Flows: intp(0), Persist: true})
	if err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("SetMode on a full disk: %v, want ENOSPC", err)
	}
	t.Logf("error: %v", err)
	after, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Configured != before.Configured || after.LastApply != nil {
		t.Errorf("live state changed: %+v -> %+v", before.Configured, after.Configured)
	}
	if got := readAllFiles(t, filepath.Join(root, "etc")); fmt.Sprint(got) != fmt.Sprint(files) {
		t.Errorf("config files changed on a full disk")
	}
}

func TestSetModeNetworkSaveFailsUndoesPacketSteering(t *testing.T) {
	corruptNetwork := "config globals 'globals'\n\toption packet_steering '1\n"
	root := configRoot(t, map[string]string{
		"network":         corruptNetwork,
		"packet_steering": "config globals 'globals'\n\toption mode 'legacy'\n\toption flows '8'\n",
	})
	e := NewEngine(root)
	ctx := context.Background()
	_, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAll, Flows: intp(16), Persist: true})
	if err == nil || !strings.Contains(err.Error(), "network") {
		t.Fatalf("SetMode with a corrupt network file: %v, want a network save error", err)
	}
	ps := loadUCI(t, root, "packet_steering")
	if m, _ := ps.Get("globals", "mode"); m != "legacy" {
		t.Errorf("packet_steering mode %q after the failed save, want legacy back", m)
	}
	if f, _ := ps.Get("globals", "flows"); f != "8" {
		t.Errorf("packet_steering flows %q after the failed save, want 8 back", f)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/config/network")); string(b) != corruptNetwork {
		t.Errorf("corrupt network file rewritten")
	}
	st, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Configured.Mode != plan.ModeLegacy || st.LastApply != nil {
		t.Errorf("live state changed: %+v, last apply %+v", st.Configured, st.LastApply)
	}
}

func TestPersistDeviceRPS(t *testing.T) {
	const before = `
config globals 'globals'
	option mode 'auto'

config device
	option name 'eth0'
	option rps_cpus 'f'
	list queue_rps 'rx-1=2'

config device
	option name 'wan'
	option xps_cpus '1'
`
	tests := []struct {
		name    string
		rps     []DeviceRPS
		wantErr bool
		want    map[string]map[string]string // device -> option -> value ("" absent)
	}{
		{
			name: "existing section: mask set, queue_rps dropped",
			rps:  []DeviceRPS{{Device: "eth0", Mask: "2"}},
			want: map[string]map[string]string{"eth0": {"rps_cpus": "2", "queue_rps": ""}, "wan": {"xps_cpus": "1", "rps_cpus": ""}},
		},
		{
			name: "new device gets a section, others untouched",
			rps:  []DeviceRPS{{Device: "br-lan", Mask: "1,00000000"}},
			want: map[string]map[string]string{"br-lan": {"rps_cpus": "1,00000000"}, "eth0": {"rps_cpus": "f", "queue_rps": "rx-1=2"}},
		},
		{name: "bad mask writes nothing", rps: []DeviceRPS{{Device: "eth0", Mask: "2"}, {Device: "wan", Mask: "zz"}}, wantErr: true},
		{name: "bad device name writes nothing", rps: []DeviceRPS{{Device: "../x", Mask: "1"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := configRoot(t, map[string]string{"packet_steering": before})
			dir := filepath.Join(root, "etc/config")
			err := PersistDeviceRPS(dir, tt.rps)
			if tt.wantErr {
				if !errors.Is(err, plan.ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				if got, _ := os.ReadFile(filepath.Join(dir, "packet_steering")); string(got) != before {
					t.Errorf("file changed on refusal:\n%s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := loadUCI(t, root, "packet_steering")
			for dev, opts := range tt.want {
				var sec *uci.Section
				for _, s := range p.SectionsOfType("device") {
					if n, _ := s.Get("name"); n == dev {
						sec = s
					}
				}
				if sec == nil {
					t.Fatalf("no device section for %s", dev)
				}
				for opt, want := range opts {
					got, _ := sec.Get(opt)
					if l := sec.List(opt); len(l) > 0 {
						got = strings.Join(l, " ")
					}
					if got != want {
						t.Errorf("%s.%s = %q, want %q", dev, opt, got, want)
					}
				}
			}
		})
	}
}

// TestRefusedConfigKeepsLastGood: a config file that is too large, has too
// many sections, is a directory or does not parse is listed in
// status.config_errors with the reason; the last good settings stay in
// force; set_mode with persist fails naming the file and the reason, and
// leaves every file as it was.
func TestRefusedConfigKeepsLastGood(t *testing.T) {
	good := "config globals 'globals'\n\toption mode 'legacy'\n\toption flows '64'\n"
	var many strings.Builder
	many.WriteString(good)
	for range uci.MaxSections {
		many.WriteString("config device\n")
	}
	tests := []struct {
		name string
		file string // the config refused
		make func(t *testing.T, path string)
		want string // in config_errors and in set_mode's error
	}{
		{"packet_steering too large", "packet_steering", func(t *testing.T, path string) {
			writeFile(t, path, good+strings.Repeat("# padding\n", uci.MaxFileSize/10+1))
		}, "over the limit of 1048576 bytes"},
		{"packet_steering too many sections", "packet_steering", func(t *testing.T, path string) {
			writeFile(t, path, many.String())
		}, "more than 10000 sections"},
		{"packet_steering a directory", "packet_steering", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"packet_steering does not parse", "packet_steering", func(t *testing.T, path string) {
			writeFile(t, path, "config globals 'globals'\n\toption mode 'off\n")
		}, "line 2"},
		{"network too large", "network", func(t *testing.T, path string) {
			writeFile(t, path, networkConfig+strings.Repeat("config device\n\toption name 'x'\n", uci.MaxFileSize/30+1))
		}, "bytes, over the limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := configRoot(t, map[string]string{"network": networkConfig, "packet_steering": good})
			testenv.WriteTree(t, root, map[string]string{"var/lock/.keep": ""})
			e := NewEngine(root)
			ctx := context.Background()
			want := plan.Settings{Mode: plan.ModeLegacy, Flows: 64, Source: plan.SourcePacketSteering}
			if st, err := e.Status(ctx); err != nil || st.Configured != want {
				t.Fatalf("good config: %+v, %v", st, err)
			}
			path := filepath.Join(root, "etc/config", tc.file)
			tc.make(t, path)
			filesBefore := readAllFiles(t, filepath.Join(root, "etc"))

			st, err := e.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Configured != want {
				t.Errorf("configured %+v, want the last good %+v", st.Configured, want)
			}
			found := false
			for _, g := range st.ConfigErrors {
				if g.Path == "etc/config/"+tc.file && strings.Contains(g.Error, tc.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("config_errors %+v, want %s with %q", st.ConfigErrors, tc.file, tc.want)
			}
			_, err = e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAll, Persist: true})
			if err == nil || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), "not overwritten") {
				t.Errorf("set_mode persist: err = %v, want it to name %s and say it is not overwritten", err, tc.file)
			}
			if got := readAllFiles(t, filepath.Join(root, "etc")); fmt.Sprint(got) != fmt.Sprint(filesBefore) {
				t.Error("config files changed by a refused set_mode")
			}
			if st, err := e.Status(ctx); err != nil || st.Configured != want {
				t.Errorf("after the refused set_mode: %+v, %v", st.Configured, err)
			}
		})
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSetModeRaceStockUCI: set_mode with persist racing `uci set
// packet_steering.globals.note=N; uci commit packet_steering` of a stock
// uci: in every round both changes survive. Opt-in: it runs with the stock
// uci named by PACKET_STEERING_STOCK_UCI (testenv.StockUCI).
func TestSetModeRaceStockUCI(t *testing.T) {
	bin := testenv.StockUCI(t)
	root := configRoot(t, map[string]string{"network": networkConfig,
		"packet_steering": "\nconfig globals 'globals'\n\toption mode 'auto'\n"})
	testenv.WriteTree(t, root, map[string]string{"var/lock/.keep": ""})
	dir := filepath.Join(root, "etc/config")
	savedir := t.TempDir()
	stock := func(args ...string) error {
		out, err := exec.Command(bin, append([]string{"-c", dir, "-t", savedir}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("uci %v: %v: %s", args, err, out)
		}
		return nil
	}
	if err := stock("set", "packet_steering.globals.note=probe"); err != nil {
		t.Skipf("uci on PATH (%s) does not work as the stock CLI: %v", bin, err)
	}
	if err := stock("commit", "packet_steering"); err != nil {
		t.Skipf("uci on PATH (%s) does not work as the stock CLI: %v", bin, err)
	}
	if v, _ := loadUCI(t, root, "packet_steering").Get("globals", "note"); v != "probe" {
		t.Skipf("uci on PATH (%s) did not commit", bin)
	}
	e := NewEngine(root)
	modes := []plan.Mode{plan.ModeOff, plan.ModeAll, plan.ModeLegacy, plan.ModeAuto}
	const rounds = 40
	lost := 0
	for i := range rounds {
		note := strconv.Itoa(i)
		mode := modes[i%len(modes)]
		var wg sync.WaitGroup
		var uciErr, setErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			if uciErr = stock("set", "packet_steering.globals.note="+note); uciErr == nil {
				uciErr = stock("commit", "packet_steering")
			}
		}()
		go func() {
			defer wg.Done()
			_, setErr = e.SetMode(context.Background(), SetModeRequest{Mode: mode, Persist: true})
		}()
		wg.Wait()
		if uciErr != nil || setErr != nil {
			t.Fatalf("round %d: uci %v, set_mode %v", i, uciErr, setErr)
		}
		p := loadUCI(t, root, "packet_steering")
		gotNote, _ := p.Get("globals", "note")
		gotMode, _ := p.Get("globals", "mode")
		if gotNote != note || gotMode != string(mode) {
			lost++
			t.Logf("round %d: note %q mode %q, want %q %q", i, gotNote, gotMode, note, mode)
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d rounds lost a change", lost, rounds)
	}
}
