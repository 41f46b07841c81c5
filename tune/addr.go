package tune

import (
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// addr is an IP address as tune takes a target: IPv4, or IPv6 (an
// IPv4-mapped IPv6 address is taken as its IPv4 address). It is written
// out rather than taken from net/netip, which costs the mipsle router
// binary about 18 KB (xz) for this one check; the tests compare it with
// net/netip.
type addr struct {
	b  [16]byte // IPv4 in b[:4]
	v4 bool
}

// parseAddr parses an IPv4 dotted quad (no leading zeros) or an IPv6
// address (RFC 4291 text, with at most one "::" and an optional dotted
// quad at the end; no zone), as net/netip.ParseAddr accepts them.
func parseAddr(s string) (addr, bool) {
	if strings.IndexByte(s, ':') < 0 {
		var a addr
		a.v4 = true
		return a, parseV4(s, a.b[:4])
	}
	return parseV6(s)
}

// parseV4 parses a dotted quad into out (4 bytes).
func parseV4(s string, out []byte) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for i, p := range parts {
		if p == "" || len(p) > 3 || (len(p) > 1 && p[0] == '0') {
			return false
		}
		n := 0
		for j := 0; j < len(p); j++ {
			if p[j] < '0' || p[j] > '9' {
				return false
			}
			n = n*10 + int(p[j]-'0')
		}
		if n > 255 {
			return false
		}
		out[i] = byte(n)
	}
	return true
}

// parseV6 parses an IPv6 address; an IPv4-mapped one comes back as IPv4.
func parseV6(s string) (addr, bool) {
	var a addr
	head, tail, double := s, "", false
	if i := strings.Index(s, "::"); i >= 0 {
		head, tail, double = s[:i], s[i+2:], true
		if strings.Contains(tail, "::") {
			return a, false
		}
	}
	hg, ok := groups(head, !double)
	if !ok {
		return a, false
	}
	var tg []byte
	if double {
		if tg, ok = groups(tail, true); !ok {
			return a, false
		}
	}
	n := len(hg) + len(tg)
	switch {
	case !double && n != 16, double && n > 14:
		return a, false
	}
	copy(a.b[:], hg)
	copy(a.b[16-len(tg):], tg)
	if isMapped(a.b) {
		var v addr
		v.v4 = true
		copy(v.b[:4], a.b[12:])
		return v, true
	}
	return a, true
}

// groups parses colon-separated hex groups of 1 to 4 digits into bytes;
// with last set the final group may be a dotted quad. "" is no groups.
func groups(s string, last bool) ([]byte, bool) {
	if s == "" {
		return nil, true
	}
	parts := strings.Split(s, ":")
	out := make([]byte, 0, 16)
	for i, p := range parts {
		if i == len(parts)-1 && last && strings.IndexByte(p, '.') >= 0 {
			var q [4]byte
			if !parseV4(p, q[:]) {
				return nil, false
			}
			out = append(out, q[:]...)
			break
		}
		if p == "" || len(p) > 4 {
			return nil, false
		}
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return nil, false
		}
		out = append(out, byte(v>>8), byte(v))
	}
	if len(out) > 16 {
		return nil, false
	}
	return out, true
}

func isMapped(b [16]byte) bool {
	for _, c := range b[:10] {
		if c != 0 {
			return false
		}
	}
	return b[10] == 0xff && b[11] == 0xff
}

func (a addr) isUnspecified() bool {
	n := 16
	if a.v4 {
		n = 4
	}
	for _, c := range a.b[:n] {
		if c != 0 {
			return false
		}
	}
	return true
}

// isMulticast: 224.0.0.0/4 or ff00::/8.
func (a addr) isMulticast() bool {
	if a.v4 {
		return a.b[0]&0xf0 == 0xe0
	}
	return a.b[0] == 0xff
}

// isLoopback: 127.0.0.0/8 or ::1.
func (a addr) isLoopback() bool {
	if a.v4 {
		return a.b[0] == 127
	}
	return a.b == [16]byte{15: 1}
}

// isBroadcast: 255.255.255.255.
func (a addr) isBroadcast() bool {
	return a.v4 && a.b[0] == 255 && a.b[1] == 255 && a.b[2] == 255 && a.b[3] == 255
}

// String formats a as net/netip does: a dotted quad, or RFC 5952 (lower
// case, no leading zeros, the first longest run of two or more zero groups
// as "::").
func (a addr) String() string {
	if a.v4 {
		return outline.Itoa(int(a.b[0])) + "." + outline.Itoa(int(a.b[1])) + "." + outline.Itoa(int(a.b[2])) + "." + outline.Itoa(int(a.b[3]))
	}
	var g [8]uint16
	for i := range g {
		g[i] = uint16(a.b[2*i])<<8 | uint16(a.b[2*i+1])
	}
	best, bestLen := -1, 1
	for i := 0; i < 8; {
		if g[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && g[j] == 0 {
			j++
		}
		if j-i > bestLen {
			best, bestLen = i, j-i
		}
		i = j
	}
	var sb strings.Builder
	for i := 0; i < 8; i++ {
		if i == best {
			sb.WriteString("::")
			i += bestLen - 1
			continue
		}
		if i > 0 && i != best+bestLen {
			sb.WriteByte(':')
		}
		sb.WriteString(outline.FormatUint(uint64(g[i]), 16))
	}
	return sb.String()
}
