// Package procmem reads a process's memory and thread count from
// /proc/PID/status (proc(5)): what the tools that hold the daemon to its
// memory budget print (scripts/flood on the host, vmguest calls in the
// test guests). It imports nothing of the product.
package procmem

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Status is one reading, sizes in kB as the kernel prints them.
type Status struct {
	// RSS is VmRSS: resident anonymous, file and shared memory.
	RSS int `json:"rss_kb"`
	// HWM is VmHWM, the peak of RSS.
	HWM int `json:"hwm_kb"`
	// Anon is RssAnon: the heap and stacks.
	Anon int `json:"anon_kb"`
	// File is RssFile: the binary's pages touched, when it is on a file
	// system with a page cache.
	File int `json:"file_kb"`
	// Shmem is RssShmem: the binary's pages when it is on a tmpfs or in
	// an initramfs.
	Shmem   int `json:"shmem_kb"`
	Threads int `json:"threads"`
}

// Read reads pid's status.
func Read(pid int) (Status, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Status{}, fmt.Errorf("procmem: %w", err)
	}
	defer f.Close()
	st, err := Parse(bufio.NewScanner(f))
	if err != nil {
		return st, fmt.Errorf("procmem: /proc/%d/status: %w", pid, err)
	}
	return st, nil
}

// Parse reads a status file's lines; a file without VmRSS (a kernel
// thread, or not a status file) is an error.
func Parse(sc *bufio.Scanner) (Status, error) {
	var st Status
	seen := false
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		if err != nil {
			continue // other fields (Name, State, masks)
		}
		switch k {
		case "VmRSS":
			st.RSS, seen = n, true
		case "VmHWM":
			st.HWM = n
		case "RssAnon":
			st.Anon = n
		case "RssFile":
			st.File = n
		case "RssShmem":
			st.Shmem = n
		case "Threads":
			st.Threads = n
		}
	}
	if err := sc.Err(); err != nil {
		return st, err
	}
	if !seen {
		return st, fmt.Errorf("no VmRSS")
	}
	return st, nil
}
