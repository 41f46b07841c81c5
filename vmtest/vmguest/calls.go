package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// memory is a process's resident memory in kB (proc(5), /proc/PID/status).
type memory struct {
	RSS   int `json:"rss_kb"`
	Anon  int `json:"anon_kb"`
	File  int `json:"file_kb"`
	Shmem int `json:"shmem_kb"`
}

// callsReport is what `vmguest calls` prints.
type callsReport struct {
	Calls   int            `json:"calls"`
	Seconds float64        `json:"seconds"`
	Before  memory         `json:"before"`
	After   memory         `json:"after"`
	Idle    memory         `json:"idle"`
	Methods map[string]int `json:"methods"`
}

// calls makes n calls to packet_steering on socket and reports pid's
// memory around them.
func calls(ctx context.Context, args []string, out io.Writer) error {
	if len(args) != 3 {
		return errors.New("usage: vmguest calls SOCKET PID N")
	}
	pid, err := strconv.Atoi(args[1])
	if err != nil || pid <= 0 {
		return fmt.Errorf("calls: PID %q", args[1])
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || n <= 0 || n > 100000 {
		return fmt.Errorf("calls: N %q: want 1-100000", args[2])
	}
	conn, err := ubus.Dial(ctx, args[0])
	if err != nil {
		return fmt.Errorf("calls: %w", err)
	}
	defer conn.Close()
	id, err := conn.LookupID(ctx, "packet_steering")
	if err != nil {
		return fmt.Errorf("calls: %w", err)
	}
	rep := callsReport{Calls: n, Methods: map[string]int{}}
	if rep.Before, err = readMemory(pid); err != nil {
		return err
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		method, margs := "status", []ubus.Attr(nil)
		switch i % 4 {
		case 1:
			method = "get_queues"
		case 2:
			method, margs = "set_mode", []ubus.Attr{ubus.String("mode", "adaptive"), ubus.Bool("persist", false)}
		case 3:
			method, margs = "set_mode", []ubus.Attr{ubus.String("mode", "auto"), ubus.Bool("persist", false)}
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := conn.Invoke(cctx, id, method, margs)
		cancel()
		if err != nil {
			return fmt.Errorf("calls: call %d (%s): %w", i+1, method, err)
		}
		rep.Methods[method]++
	}
	rep.Seconds = time.Since(start).Seconds()
	if rep.After, err = readMemory(pid); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(3 * time.Second):
	}
	if rep.Idle, err = readMemory(pid); err != nil {
		return err
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// readMemory reads VmRSS, RssAnon and RssFile of pid.
func readMemory(pid int) (memory, error) {
	var m memory
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, fmt.Errorf("calls: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		switch k {
		case "VmRSS":
			m.RSS = kb
		case "RssAnon":
			m.Anon = kb
		case "RssFile":
			m.File = kb
		case "RssShmem":
			m.Shmem = kb
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("calls: %w", err)
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("calls: no VmRSS in /proc/%d/status", pid)
	}
	return m, nil
}
