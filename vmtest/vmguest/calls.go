package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/packet-steering/packet-steering/internal/procmem"
	"github.com/packet-steering/packet-steering/internal/ubus"
)

// callsReport is what `vmguest calls` prints.
type callsReport struct {
	Calls   int            `json:"calls"`
	Seconds float64        `json:"seconds"`
	Before  procmem.Status `json:"before"`
	After   procmem.Status `json:"after"`
	Idle    procmem.Status `json:"idle"`
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

// readMemory reads pid's memory.
func readMemory(pid int) (procmem.Status, error) {
	m, err := procmem.Read(pid)
	if err != nil {
		return m, fmt.Errorf("calls: %w", err)
	}
	return m, nil
}
