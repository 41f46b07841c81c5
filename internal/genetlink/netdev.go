package genetlink

import (
	"context"
	"errors"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// The netdev family, Documentation/netlink/specs/netdev.yaml in the kernel
// tree (the numbers are those of include/uapi/linux/netdev.h, generated
// from the spec). Commands and the kernel that added them:
//
//	dev-get     1   6.3
//	queue-get   10  6.8   each rx/tx queue with the NAPI serving it
//	napi-get    11  6.8   id, ifindex, irq, pid (threaded); 6.13 the config
//	qstats-get  12  6.9   per-queue packets, bytes, drops
//	napi-set    14  6.13  defer-hard-irqs, gro-flush-timeout; 6.14
//	                      irq-suspend-timeout; 6.17 threaded
//
// A queue reports a napi-id only when its driver called
// netif_queue_set_napi(); a NAPI reports a pid only in threaded mode.
const (
	NetdevFamily = "netdev" // NETDEV_FAMILY_NAME

	netdevCmdDevGet    = 1  // NETDEV_CMD_DEV_GET
	netdevCmdQueueGet  = 10 // NETDEV_CMD_QUEUE_GET
	netdevCmdNAPIGet   = 11 // NETDEV_CMD_NAPI_GET
	netdevCmdQstatsGet = 12 // NETDEV_CMD_QSTATS_GET
	netdevCmdNAPISet   = 14 // NETDEV_CMD_NAPI_SET
)

// attribute-set "dev".
const (
	devIfindex               = 1 // u32
	devXDPFeatures           = 3 // u64, enum xdp-act
	devXDPZCMaxSegs          = 4 // u32
	devXDPRxMetadataFeatures = 5 // u64
	devXSKFeatures           = 6 // u64
)

// attribute-set "napi".
const (
	napiIfindex           = 1 // u32
	napiID                = 2 // u32
	napiIRQ               = 3 // u32
	napiPID               = 4 // u32
	napiDeferHardIRQs     = 5 // u32, at most s32-max
	napiGROFlushTimeout   = 6 // uint, nanoseconds
	napiIRQSuspendTimeout = 7 // uint, nanoseconds
	napiThreaded          = 8 // u32, enum napi-threaded (0 disabled, 1 enabled)
)

// attribute-set "queue".
const (
	queueID      = 1 // u32
	queueIfindex = 2 // u32
	queueType    = 3 // u32, enum queue-type
	queueNAPIID  = 4 // u32
)

// enum queue-type.
const (
	queueTypeRX = 0
	queueTypeTX = 1
)

// attribute-set "qstats".
const (
	qstatsIfindex   = 1 // u32
	qstatsQueueType = 2 // u32, enum queue-type
	qstatsQueueID   = 3 // u32
	qstatsScope     = 4 // uint, flags qstats-scope
	// qstatsScopeQueue is the qstats-scope flag "queue".
	qstatsScopeQueue = 1
)

// qstats counters (all of type uint), numbered from rx-packets = 8 in
// spec order; those QStats keeps by name.
const (
	qstatsRxPackets  = 8
	qstatsRxBytes    = 9
	qstatsTxPackets  = 10
	qstatsTxBytes    = 11
	qstatsRxHWDrops  = 13
	qstatsTxHWDrops  = 24
	qstatsMaxCounter = 34 // tx-wake, the last in the spec
)

// Queue types as this package names them (the spec's enum queue-type).
const (
	QueueRX = "rx"
	QueueTX = "tx"
)

// Dev is one dev-get reply.
type Dev struct {
	Ifindex               uint32
	XDPFeatures           uint64
	XDPZCMaxSegs          uint32
	XDPRxMetadataFeatures uint64
	XSKFeatures           uint64
}

// Queue is one queue-get reply.
type Queue struct {
	Ifindex uint32
	Type    string // QueueRX or QueueTX
	ID      uint32 // the queue index within its type
	// NAPIID is the NAPI instance serving the queue; 0 when the driver
	// does not say (it never called netif_queue_set_napi).
	NAPIID uint32
}

// NAPIConfig is the per-NAPI configuration of napi-get (6.13+) and what
// napi-set writes. A nil field is absent (not reported; not written).
type NAPIConfig struct {
	DeferHardIRQs     *uint32
	GROFlushTimeout   *uint64 // nanoseconds
	IRQSuspendTimeout *uint64 // nanoseconds
	Threaded          *uint32 // 0 disabled, 1 enabled (6.17+)
}

// NAPI is one napi-get reply.
type NAPI struct {
	ID      uint32
	Ifindex uint32
	IRQ     int // -1 when the NAPI has no IRQ attached
	PID     int // the NAPI kthread; 0 when not threaded
	Config  NAPIConfig
}

// QStats is one qstats-get reply with scope queue: the counters of the
// spec's qstats attribute set this package names, and which counters the
// driver reported at all.
type QStats struct {
	_       outline.NoCompare
	Ifindex uint32
	Type    string // QueueRX or QueueTX
	QueueID uint32
	// Reported has bit N set when the driver sent counter attribute N
	// (rx-packets is 8 ... tx-wake 34): a counter it does not keep is
	// absent, not zero.
	Reported uint64

	RxPackets, RxBytes, RxHWDrops uint64
	TxPackets, TxBytes, TxHWDrops uint64
}

// Has reports whether the driver sent counter attribute n.
func (s *QStats) Has(n uint16) bool { return n < 64 && s.Reported&(1<<n) != 0 }

// Counter attribute numbers for QStats.Has.
const (
	QStatRxPackets = qstatsRxPackets
	QStatRxBytes   = qstatsRxBytes
	QStatTxPackets = qstatsTxPackets
	QStatTxBytes   = qstatsTxBytes
	QStatRxHWDrops = qstatsRxHWDrops
	QStatTxHWDrops = qstatsTxHWDrops
)

// Netdev is a client of the netdev family.
type Netdev struct {
	conn   *Conn
	family *Family
}

// OpenNetdev resolves the netdev family on c. A kernel without it (before
// 6.3) gives an error for which errors.Is(err, fs.ErrNotExist) holds.
func OpenNetdev(ctx context.Context, c *Conn) (*Netdev, error) {
	f, err := c.Family(ctx, NetdevFamily)
	if err != nil {
		return nil, err
	}
	return &Netdev{conn: c, family: f}, nil
}

// Family returns the resolved family.
func (n *Netdev) Family() *Family { return n.family }

// Supports reports whether the kernel implements the named command
// ("queue-get", "napi-get", "qstats-get", "napi-set", "dev-get").
//
//go:noinline
func (n *Netdev) Supports(op string) bool {
	cmd, ok := netdevOps[op]
	return ok && n.family.HasOp(cmd)
}

var netdevOps = map[string]uint8{
	"dev-get": netdevCmdDevGet, "queue-get": netdevCmdQueueGet, "napi-get": netdevCmdNAPIGet,
	"qstats-get": netdevCmdQstatsGet, "napi-set": netdevCmdNAPISet,
}

// errNotSupported is the error of a command the kernel lacks.
//
//go:noinline
func errNotSupported(op string) error {
	return outline.Errorf("genetlink: netdev %s: not supported by this kernel: %w", op, errors.ErrUnsupported)
}

// dump runs a dump of op filtered to ifindex (0: every device).
func (n *Netdev) dump(ctx context.Context, op string, attrs func(*Encoder)) ([]Message, error) {
	if !n.Supports(op) {
		return nil, errNotSupported(op)
	}
	var e Encoder
	attrs(&e)
	b, err := e.Bytes()
	if err != nil {
		return nil, err
	}
	return n.conn.Execute(ctx, Request{Op: "netdev " + op, Family: n.family.ID, Cmd: netdevOps[op],
		Version: 1, Attrs: b, Dump: true})
}

// Devices dumps dev-get.
func (n *Netdev) Devices(ctx context.Context) ([]Dev, error) {
	msgs, err := n.dump(ctx, "dev-get", func(*Encoder) {})
	if err != nil {
		return nil, err
	}
	out := make([]Dev, 0, len(msgs))
	return out, each(msgs, func(b []byte) error {
		v, err := DecodeDev(b)
		out = append(out, v)
		return err
	})
}

// Queues dumps queue-get for one device (ifindex > 0) or all (0).
func (n *Netdev) Queues(ctx context.Context, ifindex uint32) ([]Queue, error) {
	msgs, err := n.dump(ctx, "queue-get", ifindexFilter(queueIfindex, ifindex))
	if err != nil {
		return nil, err
	}
	out := make([]Queue, 0, len(msgs))
	err = each(msgs, func(b []byte) error {
		v, err := DecodeQueue(b)
		out = append(out, v)
		return err
	})
	return out, err
}

// NAPIs dumps napi-get for one device (ifindex > 0) or all (0).
func (n *Netdev) NAPIs(ctx context.Context, ifindex uint32) ([]NAPI, error) {
	msgs, err := n.dump(ctx, "napi-get", ifindexFilter(napiIfindex, ifindex))
	if err != nil {
		return nil, err
	}
	out := make([]NAPI, 0, len(msgs))
	err = each(msgs, func(b []byte) error {
		v, err := DecodeNAPI(b)
		out = append(out, v)
		return err
	})
	return out, err
}

// NAPI gets one NAPI instance by id (napi-get do). A NAPI id the kernel
// does not have is an error for which errors.Is(err, fs.ErrNotExist)
// holds.
func (n *Netdev) NAPI(ctx context.Context, id uint32) (NAPI, error) {
	const op = "napi-get"
	if !n.Supports(op) {
		return NAPI{}, errNotSupported(op)
	}
	var e Encoder
	e.U32(napiID, id)
	b, err := e.Bytes()
	if err != nil {
		return NAPI{}, err
	}
	msgs, err := n.conn.Execute(ctx, Request{Op: "netdev " + op, Family: n.family.ID, Cmd: netdevCmdNAPIGet, Version: 1, Attrs: b})
	if err != nil {
		return NAPI{}, err
	}
	if len(msgs) != 1 {
		return NAPI{}, outline.Errorf("genetlink: netdev %s %d: %d replies, want 1", op, id, len(msgs))
	}
	return DecodeNAPI(msgs[0].Attrs)
}

// QStats dumps qstats-get per queue for one device (ifindex > 0) or all
// (0). A driver that keeps no per-queue counters answers EOPNOTSUPP for
// its ifindex (errors.Is(err, errors.ErrUnsupported)).
func (n *Netdev) QStats(ctx context.Context, ifindex uint32) ([]QStats, error) {
	msgs, err := n.dump(ctx, "qstats-get", func(e *Encoder) {
		if ifindex > 0 {
			e.U32(qstatsIfindex, ifindex)
		}
		e.Uint(qstatsScope, qstatsScopeQueue)
	})
	if err != nil {
		return nil, err
	}
	out := make([]QStats, 0, len(msgs))
	err = each(msgs, func(b []byte) error {
		v, err := DecodeQStats(b)
		out = append(out, v)
		return err
	})
	return out, err
}

// SetNAPI writes the non-nil fields of cfg to NAPI id (napi-set, 6.13+;
// irq-suspend-timeout 6.14+, threaded 6.17+). A kernel without napi-set
// gives errors.Is(err, errors.ErrUnsupported) and nothing is written; a
// field the kernel does not know is rejected by the kernel as a whole
// request (an *Error naming the attribute).
func (n *Netdev) SetNAPI(ctx context.Context, id uint32, cfg NAPIConfig) error {
	const op = "napi-set"
	if !n.Supports(op) {
		return errNotSupported(op)
	}
	var e Encoder
	e.U32(napiID, id)
	if cfg.DeferHardIRQs != nil {
		e.U32(napiDeferHardIRQs, *cfg.DeferHardIRQs)
	}
	if cfg.GROFlushTimeout != nil {
		e.Uint(napiGROFlushTimeout, *cfg.GROFlushTimeout)
	}
	if cfg.IRQSuspendTimeout != nil {
		e.Uint(napiIRQSuspendTimeout, *cfg.IRQSuspendTimeout)
	}
	if cfg.Threaded != nil {
		e.U32(napiThreaded, *cfg.Threaded)
	}
	b, err := e.Bytes()
	if err != nil {
		return err
	}
	_, err = n.conn.Execute(ctx, Request{Op: "netdev " + op, Family: n.family.ID, Cmd: netdevCmdNAPISet, Version: 1, Attrs: b})
	return err
}

func ifindexFilter(attr uint16, ifindex uint32) func(*Encoder) {
	return func(e *Encoder) {
		if ifindex > 0 {
			e.U32(attr, ifindex)
		}
	}
}

// each decodes every message's attributes with dec.
func each(msgs []Message, dec func([]byte) error) error {
	for i, m := range msgs {
		if err := dec(m.Attrs); err != nil {
			return outline.Errorf("genetlink: netdev reply %d: %w", i, err)
		}
	}
	return nil
}

// DecodeDev decodes the attributes of a dev-get reply. Unknown attributes
// are skipped; a known one with the wrong length is an error.
func DecodeDev(b []byte) (Dev, error) {
	attrs, err := DecodeAttrs(b)
	if err != nil {
		return Dev{}, err
	}
	var d Dev
	for _, a := range attrs {
		switch a.Type {
		case devIfindex:
			d.Ifindex, err = a.U32()
		case devXDPFeatures:
			d.XDPFeatures, err = a.U64()
		case devXDPZCMaxSegs:
			d.XDPZCMaxSegs, err = a.U32()
		case devXDPRxMetadataFeatures:
			d.XDPRxMetadataFeatures, err = a.U64()
		case devXSKFeatures:
			d.XSKFeatures, err = a.U64()
		}
		if err != nil {
			return Dev{}, outline.Errorf("dev: %w", err)
		}
	}
	if d.Ifindex == 0 {
		return Dev{}, outline.Errorf("%w: dev without ifindex", ErrMalformed)
	}
	return d, nil
}

// DecodeQueue decodes the attributes of a queue-get reply; id, ifindex
// and type are required.
func DecodeQueue(b []byte) (Queue, error) {
	attrs, err := DecodeAttrs(b)
	if err != nil {
		return Queue{}, err
	}
	var q Queue
	var have uint
	for _, a := range attrs {
		switch a.Type {
		case queueID:
			q.ID, err = a.U32()
		case queueIfindex:
			q.Ifindex, err = a.U32()
		case queueType:
			var t uint32
			if t, err = a.U32(); err == nil {
				q.Type, err = queueTypeName(t)
			}
		case queueNAPIID:
			q.NAPIID, err = a.U32()
		default:
			continue
		}
		if err != nil {
			return Queue{}, outline.Errorf("queue: %w", err)
		}
		have |= 1 << a.Type
	}
	if need := uint(1<<queueID | 1<<queueIfindex | 1<<queueType); have&need != need {
		return Queue{}, outline.Errorf("%w: queue without id, ifindex or type", ErrMalformed)
	}
	return q, nil
}

//go:noinline
func queueTypeName(t uint32) (string, error) {
	switch t {
	case queueTypeRX:
		return QueueRX, nil
	case queueTypeTX:
		return QueueTX, nil
	}
	return "", outline.Errorf("%w: queue type %d", ErrMalformed, t)
}

// DecodeNAPI decodes the attributes of a napi-get reply; id and ifindex
// are required.
func DecodeNAPI(b []byte) (NAPI, error) {
	attrs, err := DecodeAttrs(b)
	if err != nil {
		return NAPI{}, err
	}
	n := NAPI{IRQ: -1}
	var have uint
	for _, a := range attrs {
		var v uint32
		var u uint64
		switch a.Type {
		case napiIfindex:
			n.Ifindex, err = a.U32()
		case napiID:
			n.ID, err = a.U32()
		case napiIRQ:
			if v, err = a.U32(); err == nil {
				if v > 1<<30 {
					err = outline.Errorf("%w: irq %d", ErrMalformed, v)
				}
				n.IRQ = int(v)
			}
		case napiPID:
			if v, err = a.U32(); err == nil {
				if v > 1<<30 {
					err = outline.Errorf("%w: pid %d", ErrMalformed, v)
				}
				n.PID = int(v)
			}
		case napiDeferHardIRQs:
			if v, err = a.U32(); err == nil {
				n.Config.DeferHardIRQs = &v
			}
		case napiGROFlushTimeout:
			if u, err = a.Uint(); err == nil {
				n.Config.GROFlushTimeout = &u
			}
		case napiIRQSuspendTimeout:
			if u, err = a.Uint(); err == nil {
				n.Config.IRQSuspendTimeout = &u
			}
		case napiThreaded:
			// The spec says u32; a draft sent a uint. Accept both.
			if u, err = a.Uint(); err == nil {
				if u > 0xffffffff {
					err = outline.Errorf("%w: threaded %d", ErrMalformed, u)
				}
				v = uint32(u)
				n.Config.Threaded = &v
			}
		default:
			continue
		}
		if err != nil {
			return NAPI{}, outline.Errorf("napi: %w", err)
		}
		have |= 1 << a.Type
	}
	if need := uint(1<<napiID | 1<<napiIfindex); have&need != need {
		return NAPI{}, outline.Errorf("%w: napi without id or ifindex", ErrMalformed)
	}
	return n, nil
}

// DecodeQStats decodes the attributes of a qstats-get reply with scope
// queue; ifindex, queue-type and queue-id are required.
func DecodeQStats(b []byte) (QStats, error) {
	attrs, err := DecodeAttrs(b)
	if err != nil {
		return QStats{}, err
	}
	var s QStats
	var have uint
	for _, a := range attrs {
		switch a.Type {
		case qstatsIfindex:
			s.Ifindex, err = a.U32()
		case qstatsQueueType:
			var t uint32
			if t, err = a.U32(); err == nil {
				s.Type, err = queueTypeName(t)
			}
		case qstatsQueueID:
			s.QueueID, err = a.U32()
		default:
			if a.Type < qstatsRxPackets || a.Type > qstatsMaxCounter {
				continue
			}
			var v uint64
			if v, err = a.Uint(); err != nil {
				break
			}
			s.Reported |= 1 << a.Type
			switch a.Type {
			case qstatsRxPackets:
				s.RxPackets = v
			case qstatsRxBytes:
				s.RxBytes = v
			case qstatsTxPackets:
				s.TxPackets = v
			case qstatsTxBytes:
				s.TxBytes = v
			case qstatsRxHWDrops:
				s.RxHWDrops = v
			case qstatsTxHWDrops:
				s.TxHWDrops = v
			}
		}
		if err != nil {
			return QStats{}, outline.Errorf("qstats: %w", err)
		}
		if a.Type < 8 {
			have |= 1 << a.Type
		}
	}
	if need := uint(1<<qstatsIfindex | 1<<qstatsQueueType | 1<<qstatsQueueID); have&need != need {
		return QStats{}, outline.Errorf("%w: qstats without ifindex, queue-type or queue-id", ErrMalformed)
	}
	return s, nil
}
