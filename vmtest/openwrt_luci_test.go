package vmtest

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/netnstest"
)

// The LuCI page on the real images: check-luci.sh (sourced by check.sh)
// sets a root password and a read-only rpcd login, prints "PSCHECK
// BROWSER-READY luci" and polls http://198.18.0.1:8419/luci; the host then
// runs luci-app-packet-steering/test/openwrt.mjs (Debian's Chromium through
// playwright-core) inside the test's network namespace against the
// router's own uhttpd, LuCI and rpcd, and serves the browser's results on
// that URL, which the router prints as ordinary PSCHECK lines. See
// docs/testing-openwrt.md, "The LuCI page in a browser". The monitoring
// checks (check-monitoring.sh's mon-graph) use the same way for the
// Statistics page: "BROWSER-READY graph", results on /graph.
const (
	// luciListen is where the host answers the router's poll, inside the
	// namespace (the tap side is 198.18.0.1).
	luciListen = "0.0.0.0:8419"
	luciHost   = "198.18.0.1:8419"
	// luciRouter is the router's LuCI (lan, bridge over eth0).
	luciRouter = "http://198.18.0.2/"
	// luciMode is what the browser's Save & Apply sets (from auto): on the
	// 4-queue virtio NIC it changes every rx queue's rps_cpus.
	luciMode = "all"
	// The test's passwords (the router lives in the test's namespace only).
	luciRootPW   = "pscheck-root-4d1f"
	luciViewerPW = "pscheck-viewer-93ab"
	// luciWait bounds the router's wait for the browser run (seconds).
	luciWait = 420
	// luciBrowserTimeout bounds the browser run itself.
	luciBrowserTimeout = 6 * time.Minute
	// luciHoldEnv, when set to a file name, makes the host wait until that
	// file exists before it starts the browser (the router keeps waiting
	// too): for working on openwrt.mjs against a booted router with
	// `ip netns exec`. The namespace's name is logged.
	luciHoldEnv = "PACKET_STEERING_LUCI_HOLD"
)

// luciBudget is what the browser checks add to a boot's timeout: the
// browser runs (the router waits for them: the LuCI page, and on 22.03.4
// the Statistics graphs) and the logins; nothing on a 1-CPU boot, which
// has no browser checks.
func luciBudget(img owImage) time.Duration {
	if img.cpus == 1 {
		return 0
	}
	if os.Getenv(luciHoldEnv) != "" {
		return time.Hour
	}
	return 4 * time.Minute
}

// luciScript is the router's side of the LuCI checks.
//
//go:embed openwrt/check-luci.sh
var luciScript []byte

// luciFiles writes check-luci.sh and its settings into the router's root.
func luciFiles(root string) error {
	wait := luciWait
	if os.Getenv(luciHoldEnv) != "" {
		wait = 3600
	}
	conf := fmt.Sprintf("PSL_HOST=%q\nPSL_ROOT_PW=%q\nPSL_VIEWER_PW=%q\nPSL_MODE=%q\nPSL_WAIT=%d\n",
		luciHost, luciRootPW, luciViewerPW, luciMode, wait)
	if err := writeFile(filepath.Join(root, "root/pscheck/check-luci.sh"), luciScript, 0o644); err != nil {
		return err
	}
	return writeFile(filepath.Join(root, "root/pscheck/luci.conf"), []byte(conf), 0o644)
}

// browserPhases are the browser runs a router can ask for with
// "PSCHECK BROWSER-READY PHASE" (openwrt.mjs's PS_PHASE) and the checks
// each reports; the router polls /PHASE for the results.
var browserPhases = map[string][]string{
	"luci":  luciBrowserChecks,
	"graph": {"mon-graph-page"}, // check-monitoring.sh: the Statistics page
}

// luciRun is the host side of one boot's browser checks: the endpoints the
// router polls and the browser runs the router's BROWSER-READY lines start
// (one per phase).
type luciRun struct {
	t   *testing.T
	img owImage
	ns  *netnstest.NS
	ctx context.Context
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup

	mu      sync.Mutex
	started map[string]bool
	result  map[string][]byte // a phase's entry once its browser run is done
}

// startLuci listens inside ns for the router's poll; its cleanup (before
// the namespace's) stops the browser and the server.
func startLuci(ctx context.Context, t *testing.T, img owImage, ns *netnstest.NS) *luciRun {
	ctx, cancel := context.WithCancel(ctx)
	l := &luciRun{t: t, img: img, ns: ns, ctx: ctx, started: map[string]bool{}, result: map[string][]byte{}}
	err := ns.Do(func() error {
		var err error
		l.ln, err = net.Listen("tcp", luciListen)
		return err
	})
	if err != nil {
		// The router then reports every browser check as not reported.
		t.Errorf("%s: LuCI checks: listen in %s: %v", img.name, ns.Name, err)
		cancel()
		return l
	}
	mux := http.NewServeMux()
	for phase := range browserPhases {
		mux.HandleFunc("/"+phase, func(w http.ResponseWriter, _ *http.Request) { l.serve(w, phase) })
	}
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(l.ln) }()
	t.Cleanup(func() {
		cancel()
		l.wg.Wait()
		_ = l.srv.Close()
	})
	return l
}

// serve answers the router's poll of phase: 503 until its browser run is
// done, then its result lines.
func (l *luciRun) serve(w http.ResponseWriter, phase string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	res, ok := l.result[phase]
	if !ok {
		http.Error(w, "browser run not done", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(res)
}

// line starts a phase's browser run (once) when the router says it is
// ready for it.
func (l *luciRun) line(s string) {
	if l.srv == nil {
		return
	}
	_, rest, ok := strings.Cut(s, "PSCHECK BROWSER-READY ")
	if !ok {
		return
	}
	phase := strings.TrimSpace(rest)
	checks, ok := browserPhases[phase]
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started[phase] {
		return
	}
	l.started[phase] = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		res := l.browse(phase, checks)
		l.mu.Lock()
		l.result[phase] = res
		l.mu.Unlock()
	}()
}

// browse runs openwrt.mjs's phase in the namespace and returns its result
// lines ("PASS name", "FAIL name: why", "TIME name Ns"); a run that could
// not start or died reports every check it did not report as failed.
func (l *luciRun) browse(phase string, checks []string) []byte {
	start := time.Now()
	if hold := os.Getenv(luciHoldEnv); hold != "" {
		l.t.Logf("%s: LuCI: holding until %s exists; the router is %s in namespace %s", l.img.name, hold, luciRouter, l.ns.Name)
		for {
			if _, err := os.Stat(hold); err == nil {
				break
			}
			select {
			case <-l.ctx.Done():
				return luciResult(phase, checks, nil, errors.New("cancelled while holding"), time.Since(start))
			case <-time.After(time.Second):
			}
		}
	}
	lines, err := l.runBrowser(phase)
	return luciResult(phase, checks, lines, err, time.Since(start))
}

// luciBrowserChecks are the checks openwrt.mjs reports (check-luci.sh's
// LUCI_BROWSER).
var luciBrowserChecks = []string{"luci-login", "luci-queues", "luci-save-apply", "luci-readonly"}

// luciResult is what the router is served for phase: the browser's result
// lines, then, when the run failed, a FAIL with its error for every one of
// checks it did not report, and the run's time.
func luciResult(phase string, checks, lines []string, err error, took time.Duration) []byte {
	var b strings.Builder
	reported := map[string]bool{}
	for _, l := range lines {
		b.WriteString(l + "\n")
		if kind, rest, ok := strings.Cut(l, " "); ok && (kind == "PASS" || kind == "FAIL") {
			name, _, _ := strings.Cut(rest, ":")
			reported[name] = true
		}
	}
	if err != nil {
		why := strings.ReplaceAll(err.Error(), "\n", " ")
		for _, n := range checks {
			if !reported[n] {
				fmt.Fprintf(&b, "FAIL %s: browser run: %s\n", n, why)
			}
		}
	}
	name := "luci-browser"
	if phase != "luci" {
		name = phase + "-browser"
	}
	fmt.Fprintf(&b, "TIME %s %.1fs\n", name, took.Seconds())
	return []byte(b.String())
}

// runBrowser runs node on openwrt.mjs's phase inside the namespace and
// collects its RESULT lines; the rest of its output goes to the test log.
func (l *luciRun) runBrowser(phase string) ([]string, error) {
	repo, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(repo, "luci-app-packet-steering", "test")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		return nil, errors.New("playwright-core is missing: scripts/deps.sh test installs it")
	}
	shots := filepath.Join(repo, "out", "luci-openwrt")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(l.ctx, luciBrowserTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", l.ns.Name, "node", "openwrt.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PS_URL="+luciRouter, "PS_ROOT_PW="+luciRootPW, "PS_VIEWER_PW="+luciViewerPW,
		"PS_MODE="+luciMode, "PS_SHOT="+filepath.Join(shots, l.img.name), "PS_PHASE="+phase)
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s := sc.Text()
		if r, ok := strings.CutPrefix(s, "RESULT "); ok {
			lines = append(lines, r)
		}
		l.t.Logf("%s: luci: %s", l.img.name, s)
	}
	if err := cmd.Wait(); err != nil {
		return lines, fmt.Errorf("node openwrt.mjs: %w", err)
	}
	return lines, nil
}
