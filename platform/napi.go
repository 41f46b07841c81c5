package platform

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
)

// Processes, from proc/PID (Documentation/filesystems/proc.rst, fs/proc/
// array.c):
//
//	comm    the task name, at most 15 bytes (TASK_COMM_LEN)
//	stat    "pid (comm) state ppid pgrp session tty_nr tpgid flags ...";
//	        comm may hold spaces and parentheses, so the fields after it are
//	        found after the LAST ')'. flags (field 9) carries PF_KTHREAD.
//	status  "Key:\tvalue" lines; Cpus_allowed_list is the affinity cpu list
//
// Threaded NAPI threads are kernel threads named napi/<dev>-<napi id>
// (net/core/dev.c napi_kthread_create); mtk_soc_eth names its NAPI device
// "mtk_eth" and mt76 wifi its phy.
const procDir = "proc"

// pfKthread is PF_KTHREAD from include/linux/sched.h.
const pfKthread = 0x00200000

// TaskStat is what steering needs from one proc/PID/stat: the thread's
// name and whether it is a kernel thread.
type TaskStat struct {
	PID    int
	Comm   string
	Kernel bool // PF_KTHREAD is set in the flags field
}

// ParseTaskStat parses the contents of proc/PID/stat (fs/proc/array.c
// do_task_stat). The comm is taken between the first '(' and the last ')',
// so a name holding spaces or parentheses cannot shift the fields after it.
// The applier calls it right before moving a thread, so that only a kernel
// thread with the expected name is ever moved.
func ParseTaskStat(b []byte) (TaskStat, error) {
	f, err := scanStat(b)
	if err != nil {
		return TaskStat{}, err
	}
	return TaskStat{PID: f.pid, Comm: string(f.comm), Kernel: f.flags&pfKthread != 0}, nil
}

// napiPrefix starts every threaded NAPI thread's name.
const napiPrefix = "napi/"

// processOfInterest reports user-space programs that matter to steering:
// irqbalance moves IRQ affinities behind the steering's back.
func processOfInterest(comm string) bool { return comm == "irqbalance" }

// procStat is what this package needs from proc/PID/stat.
type procStat struct {
	PID   int
	Comm  string
	State string
	Flags uint64
}

// parseStat parses proc/PID/stat (fs/proc/array.c do_task_stat). The comm
// field is taken between the first '(' and the last ')', so names with
// spaces or parentheses are handled; flags is the 6th field after it.
func parseStat(r io.Reader) (procStat, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return procStat{}, err
	}
	f, err := scanStat(b)
	if err != nil {
		return procStat{}, err
	}
	return procStat{PID: f.pid, Comm: string(f.comm), State: string(f.state), Flags: f.flags}, nil
}

// statFields are the fields of proc/PID/stat this package uses, the byte
// slices pointing into the file's contents.
type statFields struct {
	pid   int
	comm  []byte
	state []byte
	flags uint64
}

// scanStat is parseStat on the file's bytes, without allocating.
func scanStat(b []byte) (statFields, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return statFields{}, errors.New("stat: no (comm) field")
	}
	var st statFields
	pid, ok := atoiBytes(bytes.TrimSpace(b[:open]))
	if !ok {
		return statFields{}, outline.Errorf("stat: bad pid %q", b[:open])
	}
	st.pid = pid
	st.comm = b[open+1 : closing]
	// state ppid pgrp session tty_nr tpgid flags
	rest := b[closing+1:]
	var field []byte
	for n := 0; n < 7; n++ {
		field, rest = nextField(rest)
		if field == nil {
			return statFields{}, outline.Errorf("stat: %d fields after comm, want at least 7", n)
		}
		if n == 0 {
			st.state = field
		}
	}
	flags, ok := parseUintBytes(field)
	if !ok {
		return statFields{}, outline.Errorf("stat: bad flags %q", field)
	}
	st.flags = flags
	return st, nil
}

// nextField returns the first space-separated field of b and the rest; the
// field is nil when b holds only white space.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i == len(b) {
		return nil, nil
	}
	j := i
	for j < len(b) && !isSpace(b[j]) {
		j++
	}
	return b[i:j], b[j:]
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// parseUintBytes parses a decimal uint64 as strconv.ParseUint(s, 10, 64)
// does (no sign, no underscores), without allocating.
//
//go:noinline
func parseUintBytes(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// parseCpusAllowedList returns the Cpus_allowed_list value of
// proc/PID/status (fs/proc/array.c task_cpus_allowed).
func parseCpusAllowedList(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, kfs.MaxFile))
	if err != nil {
		return "", err
	}
	return cpusAllowedList(b)
}

// cpusAllowedList is parseCpusAllowedList on the file's bytes.
func cpusAllowedList(b []byte) (string, error) {
	const key = "Cpus_allowed_list:"
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			s := string(bytes.TrimSpace(v))
			if _, err := cpuset.ParseList(s); err != nil {
				return "", outline.Errorf("status: Cpus_allowed_list: %w", err)
			}
			return s, nil
		}
	}
	return "", errors.New("status: no Cpus_allowed_list line")
}

// parseNAPIName splits "napi/eth0-257" into owner "eth0" and id 257. The id
// is -1 when the name has no numeric suffix (e.g. cut by TASK_COMM_LEN).
func parseNAPIName(comm string) (owner string, id int, ok bool) {
	rest, ok := strings.CutPrefix(comm, napiPrefix)
	if !ok || rest == "" {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return rest, -1, true
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 0 {
		return rest[:i], -1, true
	}
	return rest[:i], n, true
}

// readProcesses scans proc/[0-9]* for threaded NAPI kernel threads and the
// user processes of interest. One read of proc/PID/stat gives both the name
// and the flags; proc/PID/status is read only for NAPI kernel threads.
// Processes that exit during the scan are skipped silently; that is not a
// gap.
func (f *reader) readProcesses(ctx context.Context, g *gaps) ([]NAPIThread, []string) {
	pfd, err := f.Sub(f.dir, procDir)
	if err != nil {
		g.add(procDir, err)
		return nil, nil
	}
	defer pfd.Close()
	// Only the numeric entries are processes; a router has about as many
	// other entries, which are not kept.
	var names []string
	err = f.Names(pfd, func(e []byte) {
		if len(e) != 0 && isDigit(e[0]) {
			names = append(names, string(e))
		}
	})
	if err != nil {
		g.add(procDir, err)
		return nil, nil
	}
	outline.SortStrings(names)
	threads := []NAPIThread{}
	var procs []string
	for i, n := range names {
		if i%256 == 0 && ctx.Err() != nil {
			g.add(procDir, ctx.Err())
			break
		}
		if n == "" || !isDigit(n[0]) {
			continue
		}
		pid, ok := atoiBytes([]byte(n))
		if !ok || pid <= 0 {
			continue
		}
		b, err := f.Attr(pfd, n, "stat")
		if err != nil {
			if !vanished(err) {
				g.add(procDir+"/"+n+"/stat", err)
			}
			continue
		}
		// A name that is neither napi/... nor of interest is skipped before
		// the rest of the line is parsed.
		comm := statComm(b)
		isNAPI := bytes.HasPrefix(comm, []byte(napiPrefix)) || isTxWorker(comm)
		if !isNAPI && !processOfInterest(string(comm)) {
			continue
		}
		st, err := scanStat(b)
		if err != nil {
			g.add(procDir+"/"+n+"/stat", &fs.PathError{Op: "parse", Path: procDir + "/" + n + "/stat", Err: err})
			continue
		}
		kthread := st.flags&pfKthread != 0
		if !isNAPI {
			if !kthread && !slices.Contains(procs, string(st.comm)) {
				procs = append(procs, string(st.comm))
			}
			continue
		}
		if !kthread {
			continue // a user process calling itself napi/...: never ours
		}
		name := string(st.comm)
		owner, id, _ := parseNAPIName(name)
		t := NAPIThread{PID: pid, Name: name, Owner: owner, NAPIID: id, CPUTicks: statTicks(b)}
		// In a scoped read, CPUs are read once the thread's device is
		// known (read).
		if f.scope == nil {
			var ok bool
			if t.CPUs, ok = f.threadCPUs(n, g); !ok {
				continue
			}
		}
		threads = append(threads, t)
	}
	sort.Slice(threads, func(a, b int) bool { return threads[a].PID < threads[b].PID })
	outline.SortStrings(procs)
	return threads, procs
}

// threadCPUs reads the Cpus_allowed_list of process pid; false when the
// process exited (not a gap).
func (f *reader) threadCPUs(pid string, g *gaps) (string, bool) {
	rel := procDir + "/" + pid + "/status"
	b, err := f.Attr(f.dir, rel)
	cpus := ""
	if err == nil {
		if cpus, err = cpusAllowedList(b); err != nil {
			err = &fs.PathError{Op: "parse", Path: rel, Err: err}
		}
	}
	if err != nil {
		if vanished(err) {
			return "", false
		}
		g.add(rel, err)
	}
	return cpus, true
}

// statComm returns the comm field of proc/PID/stat's bytes (between the
// first '(' and the last ')'), or nil.
func statComm(b []byte) []byte {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return nil
	}
	return b[open+1 : closing]
}

// vanished reports an error that means the process has exited.
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// mtkEthDriver is the driver whose NAPI threads are named napi/mtk_eth-N
// (drivers/net/ethernet/mediatek/mtk_eth_soc.c uses a dummy netdev named
// "mtk_eth" for NAPI).
const mtkEthDriver = "mtk_soc_eth"

// tieThreads sets each thread's Device: the owner itself when a netdev of
// that name exists; for "mtk_eth" the first netdev (by name) driven by
// mtk_soc_eth, preferring a DSA conduit; for a wifi phy ("phyN") nothing,
// the Owner names the phy.
func tieThreads(threads []NAPIThread, devs []Device) {
	idx := deviceIndex(devs)
	mtk := ""
	for _, d := range devs {
		if d.Driver == mtkEthDriver && d.Kind != KindDSAUser {
			if mtk == "" || (d.Kind == KindDSAConduit && devs[idx[mtk]].Kind != KindDSAConduit) {
				mtk = d.Name
			}
		}
	}
	for i := range threads {
		t := &threads[i]
		switch {
		case t.Owner == "mtk_eth":
			t.Device = mtk
		default:
			if _, ok := idx[t.Owner]; ok {
				t.Device = t.Owner
			}
		}
	}
}

// classifyThreads sets each thread's Direction, per device (threads with
// the same Device), after tieThreads and tieIRQs. Every thread is DirRX
// unless one of these rules, tried in order, says DirTX:
//
//  1. NAPI id 0. A driver adds a transmit-only NAPI instance with
//     netif_napi_add_tx (or _tx_weight), which marks it
//     NAPI_STATE_NO_BUSY_POLL; napi_hash_add gives no id to such an
//     instance, so its thread is "napi/<dev>-0" (net/core/dev.c;
//     include/linux/netdevice.h). virtio_net (virtnet_alloc_queues: one rx
//     and one tx NAPI per queue pair), ipqess (ipq40xx), bcm4908_enet and
//     qualcommax's qca_edma add their tx NAPIs this way. Every real rx NAPI
//     id is above 0 (the stock packet-steering.uc counts only those as rx
//     tasks).
//  2. Drivers that add a tx NAPI first with an id of its own: mtk_soc_eth
//     (mtk_probe: netif_napi_add(dummy_dev, &tx_napi) then &rx_napi, both
//     on the dummy netdev named "mtk_eth") and the qca-nss-dp EDMA, whose
//     tx thread the stock qualcommax smp_affinity script
//     (target/linux/qualcommax/ipq807x/base-files/etc/init.d/smp_affinity)
//     takes as the napi/eth0-N with the lowest id and the rx thread as the
//     one with the highest. NAPI ids are handed out in increasing order, so
//     with no id-0 thread, two threads give the lower one DirTX, and more
//     threads than rx queues give the lowest surplus DirTX.
//  3. A device whose per-queue IRQs are separate rx and tx vectors
//     ("<dev>-rx-N", "<dev>-tx-N", none "-TxRx-"), with exactly one thread
//     per vector: igc and igb allocate the rx-only vectors first and the
//     tx-only ones after them (igc_main.c igc_alloc_q_vectors), each with
//     its own NAPI, so the threads in NAPI id order are the rx vectors'
//     then the tx vectors'.
//
// Drivers whose one NAPI per queue vector serves both directions (mvpp2,
// igc "-TxRx-", bgmac, wifi) have only DirRX threads.
func classifyThreads(threads []NAPIThread, devs []Device, irqs []IRQ) {
	idx := deviceIndex(devs)
	groups := map[string][]int{}
	var order []string
	for i := range threads {
		threads[i].Direction = DirRX
		d := threads[i].Device
		if d == "" {
			continue
		}
		if _, ok := groups[d]; !ok {
			order = append(order, d)
		}
		groups[d] = append(groups[d], i)
	}
	type vecs struct{ rx, tx, rxtx int }
	perDev := map[string]*vecs{}
	for _, q := range irqs {
		if q.Device == "" || q.Queue < 0 {
			continue
		}
		v := perDev[q.Device]
		if v == nil {
			v = &vecs{}
			perDev[q.Device] = v
		}
		switch q.Direction {
		case DirTX:
			v.tx++
		case DirRxTx:
			v.rxtx++
		default:
			v.rx++
		}
	}
	for _, name := range order {
		g := groups[name]
		sort.SliceStable(g, func(a, b int) bool { return threads[g[a]].NAPIID < threads[g[b]].NAPIID })
		hasZero := false
		for _, i := range g {
			if threads[i].NAPIID == 0 {
				threads[i].Direction = DirTX
				hasZero = true
			}
		}
		if hasZero || len(g) < 2 {
			continue
		}
		d := &devs[idx[name]]
		ntx := 0
		switch v := perDev[name]; {
		case d.Driver == mtkEthDriver || isEDMADriver(d.Driver):
			if len(g) == 2 {
				ntx = 1
			} else if surplus := len(g) - len(d.RxQueues); surplus > 0 {
				ntx = surplus
			}
			for _, i := range g[:ntx] {
				threads[i].Direction = DirTX
			}
		case v != nil && v.rx > 0 && v.tx > 0 && v.rxtx == 0 && len(g) == v.rx+v.tx:
			for _, i := range g[v.rx:] {
				threads[i].Direction = DirTX
			}
		}
	}
}
