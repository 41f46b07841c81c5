package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A kernel-only PPPoE session (the test beds' PPPoE link, docs/platforms.md
// "Test beds"): what pppd's rp-pppoe plugin leaves in the kernel once the
// discovery and LCP are done, without either. The peer's MAC and the
// session id are fixed by the caller, who sends the session's frames
// itself. The kernel objects live as long as the file descriptors:
//
//	s := socket(AF_PPPOX, SOCK_STREAM, PX_PROTO_OE)
//	connect(s, {sid, peer MAC, dev})      session bound to the device
//	ioctl(s, PPPIOCGCHAN, &chan)           the session's ppp channel
//	c := open(/dev/ppp); ioctl(c, PPPIOCATTCHAN, &chan)
//	u := open(/dev/ppp); ioctl(u, PPPIOCNEWUNIT, &unit)   the ppp netdev
//	ioctl(c, PPPIOCCONNECT, &unit)         channel -> unit
//	ioctl(u, PPPIOCSNPMODE, {PPP_IP, NPMODE_PASS})
//
// (include/uapi/linux/if_pppox.h, include/uapi/linux/ppp-ioctl.h; the
// ioctl numbers in the generic encoding of x86 and arm, not MIPS.)
const (
	afPPPoX   = 24 // AF_PPPOX
	pxProtoOE = 0  // PX_PROTO_OE

	pppiocgchan   = 0x80047437 // _IOR('t', 55, int)
	pppiocattchan = 0x40047438 // _IOW('t', 56, int)
	pppiocconnect = 0x4004743a // _IOW('t', 58, int)
	pppiocnewunit = 0xc004743e // _IOWR('t', 62, int)
	pppiocsnpmode = 0x4008744b // _IOW('t', 75, struct npioctl)
	pppProtoIP    = 0x21       // PPP_IP
	npmodePass    = 0          // NPMODE_PASS
	sockaddrPPPoE = 30         // sizeof(struct sockaddr_pppox), packed
	maxSessionID  = 0xfffe     // 0 and 0xffff are reserved (RFC 2516)
	ifNameSize    = 16         // IFNAMSIZ
	pppDevicePath = "/dev/ppp" // ppp_generic's character device
)

// pppoeConfig is one `vmguest pppoe`.
type pppoeConfig struct {
	dev  string
	peer net.HardwareAddr
	sid  int
	name string
}

// pppoe makes the session and the ppp unit, renames the unit to cfg.name,
// prints "unit N NAME" and keeps the session until ctx ends.
func pppoe(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("pppoe", flag.ContinueOnError)
	var cfg pppoeConfig
	var peer string
	fs.StringVar(&cfg.dev, "dev", "", "Ethernet device the session runs over")
	fs.StringVar(&peer, "peer", "", "the access concentrator's MAC")
	fs.IntVar(&cfg.sid, "sid", 0, "session id (1-65534)")
	fs.StringVar(&cfg.name, "name", "", "name for the ppp netdev (pppoe-wan)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if cfg.peer, err = net.ParseMAC(peer); err != nil || len(cfg.peer) != 6 {
		return fmt.Errorf("pppoe: bad -peer %q", peer)
	}
	switch {
	case cfg.dev == "" || len(cfg.dev) >= ifNameSize:
		return fmt.Errorf("pppoe: bad -dev %q", cfg.dev)
	case cfg.name == "" || len(cfg.name) >= ifNameSize:
		return fmt.Errorf("pppoe: bad -name %q", cfg.name)
	case cfg.sid < 1 || cfg.sid > maxSessionID:
		return fmt.Errorf("pppoe: bad -sid %d", cfg.sid)
	}
	fds, unit, err := pppoeSession(cfg)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if err != nil {
		return fmt.Errorf("pppoe: %w", err)
	}
	if err := renameLink(fmt.Sprintf("ppp%d", unit), cfg.name); err != nil {
		return fmt.Errorf("pppoe: %w", err)
	}
	fmt.Fprintf(out, "unit %d %s\n", unit, cfg.name)
	if f, ok := out.(*os.File); ok {
		_ = f.Sync()
	}
	<-ctx.Done()
	return nil
}

// pppoeSession does the calls above; it returns every descriptor it opened
// (also on error, for the caller to close) and the unit number.
func pppoeSession(cfg pppoeConfig) ([]int, int, error) {
	var fds []int
	s, err := unix.Socket(afPPPoX, unix.SOCK_STREAM, pxProtoOE)
	if err != nil {
		return fds, 0, fmt.Errorf("AF_PPPOX socket (is pppoe.ko loaded?): %w", err)
	}
	fds = append(fds, s)
	// struct sockaddr_pppox (packed): u16 family, u32 protocol, then
	// struct pppoe_addr: be16 sid, u8 remote[6], char dev[16].
	var sa [sockaddrPPPoE]byte
	binary.NativeEndian.PutUint16(sa[0:], afPPPoX)
	binary.NativeEndian.PutUint32(sa[2:], pxProtoOE)
	binary.BigEndian.PutUint16(sa[6:], uint16(cfg.sid))
	copy(sa[8:14], cfg.peer)
	copy(sa[14:], cfg.dev)
	if _, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(s), uintptr(unsafe.Pointer(&sa[0])), uintptr(len(sa))); e != 0 {
		return fds, 0, fmt.Errorf("connect session %d on %s: %w", cfg.sid, cfg.dev, e)
	}
	var ch int32
	if err := ioctlPtr(s, pppiocgchan, unsafe.Pointer(&ch)); err != nil {
		return fds, 0, fmt.Errorf("PPPIOCGCHAN: %w", err)
	}
	chanFD, err := unix.Open(pppDevicePath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fds, 0, fmt.Errorf("open %s (is ppp_generic loaded?): %w", pppDevicePath, err)
	}
	fds = append(fds, chanFD)
	if err := ioctlPtr(chanFD, pppiocattchan, unsafe.Pointer(&ch)); err != nil {
		return fds, 0, fmt.Errorf("PPPIOCATTCHAN %d: %w", ch, err)
	}
	unitFD, err := unix.Open(pppDevicePath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fds, 0, fmt.Errorf("open %s: %w", pppDevicePath, err)
	}
	fds = append(fds, unitFD)
	unit := int32(-1)
	if err := ioctlPtr(unitFD, pppiocnewunit, unsafe.Pointer(&unit)); err != nil {
		return fds, 0, fmt.Errorf("PPPIOCNEWUNIT: %w", err)
	}
	if err := ioctlPtr(chanFD, pppiocconnect, unsafe.Pointer(&unit)); err != nil {
		return fds, 0, fmt.Errorf("PPPIOCCONNECT unit %d: %w", unit, err)
	}
	np := [2]int32{pppProtoIP, npmodePass} // struct npioctl
	if err := ioctlPtr(unitFD, pppiocsnpmode, unsafe.Pointer(&np)); err != nil {
		return fds, 0, fmt.Errorf("PPPIOCSNPMODE: %w", err)
	}
	return fds, int(unit), nil
}

func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// renameLink renames a down netdev (SIOCSIFNAME).
func renameLink(from, to string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("rename %s: %w", from, err)
	}
	defer unix.Close(fd)
	// struct ifreq (40 bytes on 64-bit, 32 on 32-bit): the name, then
	// ifr_newname in the union; the kernel copies the whole struct.
	var req [40]byte
	copy(req[:ifNameSize-1], from)
	copy(req[ifNameSize:2*ifNameSize-1], to)
	if err := ioctlPtr(fd, unix.SIOCSIFNAME, unsafe.Pointer(&req[0])); err != nil {
		return fmt.Errorf("rename %s to %s: %w", from, to, err)
	}
	return nil
}
