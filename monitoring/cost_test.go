package monitoring_test

import (
	byteorder "encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestScrapeCost prints what one scrape of the Lua exporter costs: wall
// time, the daemon's CPU time (from /proc/PID/stat) and how many times the
// daemon read the machine (opens of eth0's rx-0 rps_cpus in the fixture,
// which every full platform read opens once and the collector never does,
// counted with inotify). Figures, not a timed test: only the read count is
// checked: the collector asks status with queues, which the daemon answers
// from one read of the machine (it keeps no cache: a status must show a
// change made a moment ago), so a scrape costs one read, never more.
func TestScrapeCost(t *testing.T) {
	requireMonitoring(t, "lua5.1", "unshare")
	w := newWorld(t, "", preset)
	w.startDaemon(t)
	path := ubusStandIn(t, w.sock)
	scrapeLua(t, w, path) // warm caches

	var opens atomic.Int64
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	// Closes too: inotify merges an event with an identical one not yet
	// read, so two opens in a row would count once.
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(w.root, "sys/class/net/eth0/queues/rx-0/rps_cpus"), unix.IN_OPEN|unix.IN_CLOSE_NOWRITE); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				mask := byteorder.NativeEndian.Uint32(buf[off+4:])
				l := byteorder.NativeEndian.Uint32(buf[off+12:])
				if mask&unix.IN_OPEN != 0 {
					opens.Add(1)
				}
				off += unix.SizeofInotifyEvent + int(l)
			}
		}
	}()
	defer unix.Close(fd)

	const n = 50
	cpu0 := procCPU(t, w.daemon.Process.Pid)
	var wall time.Duration
	for i := 0; i < n; i++ {
		time.Sleep(100 * time.Millisecond)
		_, took := scrapeLua(t, w, path)
		wall += took
	}
	time.Sleep(200 * time.Millisecond) // the last inotify events
	cpu := procCPU(t, w.daemon.Process.Pid) - cpu0
	reads := opens.Load()
	fmt.Printf("scrape cost (%d scrapes, Lua exporter in a mount namespace, fixture %s): wall %.1f ms/scrape, daemon CPU %.2f ms/scrape, daemon platform reads %.2f/scrape\n",
		n, preset, float64(wall.Microseconds())/1000/n, float64(cpu.Microseconds())/1000/n, float64(reads)/n)
	if reads != n {
		t.Errorf("%d platform reads in %d scrapes, want 1 per scrape (status with queues)", reads, n)
	}
}

// procCPU is a process' user+system CPU time from /proc/PID/stat.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / hz
}
