package platform

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
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
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return procStat{}, errors.New("stat: no (comm) field")
	}
	var st procStat
	if st.PID, err = strconv.Atoi(strings.TrimSpace(string(b[:open]))); err != nil {
		return procStat{}, fmt.Errorf("stat: bad pid %q", b[:open])
	}
	st.Comm = string(b[open+1 : closing])
	fields := strings.Fields(string(b[closing+1:]))
	// state ppid pgrp session tty_nr tpgid flags
	if len(fields) < 7 {
		return procStat{}, fmt.Errorf("stat: %d fields after comm, want at least 7", len(fields))
	}
	st.State = fields[0]
	if st.Flags, err = strconv.ParseUint(fields[6], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("stat: bad flags %q", fields[6])
	}
	return st, nil
}

// parseCpusAllowedList returns the Cpus_allowed_list value of
// proc/PID/status (fs/proc/array.c task_cpus_allowed).
func parseCpusAllowedList(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			v = strings.TrimSpace(v)
			if _, err := ParseCPUList(v); err != nil {
				return "", fmt.Errorf("status: Cpus_allowed_list: %w", err)
			}
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
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
// user processes of interest. Processes that exit during the scan are
// skipped silently; that is not a gap.
func (f FS) readProcesses(ctx context.Context, g *gaps) ([]NAPIThread, []string) {
	names, err := readDirNames(f.Path(procDir))
	if err != nil {
		g.add(procDir, err)
		return nil, nil
	}
	threads := []NAPIThread{}
	procSet := map[string]bool{}
	for i, n := range names {
		if i%256 == 0 && ctx.Err() != nil {
			g.add(procDir, ctx.Err())
			break
		}
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		dir := procDir + "/" + n
		comm, err := f.readString(dir + "/comm")
		if err != nil {
			if !vanished(err) {
				g.add(dir+"/comm", err)
			}
			continue
		}
		isNAPI := strings.HasPrefix(comm, napiPrefix)
		if !isNAPI && !processOfInterest(comm) {
			continue
		}
		st, err := f.readStat(dir + "/stat")
		if err != nil {
			if !vanished(err) {
				g.add(dir+"/stat", err)
			}
			continue
		}
		kthread := st.Flags&pfKthread != 0
		if !isNAPI {
			if !kthread {
				procSet[comm] = true
			}
			continue
		}
		if !kthread {
			continue // a user process calling itself napi/...: never ours
		}
		owner, id, _ := parseNAPIName(comm)
		t := NAPIThread{PID: pid, Name: comm, Owner: owner, NAPIID: id}
		if t.CPUs, err = f.readCpusAllowed(dir + "/status"); err != nil {
			if vanished(err) {
				continue
			}
			g.add(dir+"/status", err)
		}
		threads = append(threads, t)
	}
	sort.Slice(threads, func(a, b int) bool { return threads[a].PID < threads[b].PID })
	procs := make([]string, 0, len(procSet))
	for p := range procSet {
		procs = append(procs, p)
	}
	sort.Strings(procs)
	if len(procs) == 0 {
		procs = nil
	}
	return threads, procs
}

// vanished reports an error that means the process has exited.
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

func (f FS) readStat(rel string) (procStat, error) {
	fh, err := os.Open(f.Path(rel))
	if err != nil {
		return procStat{}, err
	}
	defer fh.Close()
	st, err := parseStat(fh)
	if err != nil {
		return procStat{}, &fs.PathError{Op: "parse", Path: rel, Err: err}
	}
	return st, nil
}

func (f FS) readCpusAllowed(rel string) (string, error) {
	fh, err := os.Open(f.Path(rel))
	if err != nil {
		return "", err
	}
	defer fh.Close()
	v, err := parseCpusAllowedList(fh)
	if err != nil {
		return "", &fs.PathError{Op: "parse", Path: rel, Err: err}
	}
	return v, nil
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
