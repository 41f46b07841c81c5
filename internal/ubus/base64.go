package ubus

import "strconv"

// The []byte fields of the value codec travel as standard padded base64
// (RFC 4648 section 4), as encoding/json writes them. These two functions
// stand in for encoding/base64, which costs the router binary about 12 KB
// for the two calls the codec makes; base64_test.go checks them against
// encoding/base64.

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// b64Encode is base64.StdEncoding.EncodeToString.
func b64Encode(src []byte) string {
	out := make([]byte, 0, (len(src)+2)/3*4)
	for len(src) >= 3 {
		v := uint(src[0])<<16 | uint(src[1])<<8 | uint(src[2])
		out = append(out, b64Alphabet[v>>18&63], b64Alphabet[v>>12&63], b64Alphabet[v>>6&63], b64Alphabet[v&63])
		src = src[3:]
	}
	switch len(src) {
	case 1:
		v := uint(src[0]) << 16
		out = append(out, b64Alphabet[v>>18&63], b64Alphabet[v>>12&63], '=', '=')
	case 2:
		v := uint(src[0])<<16 | uint(src[1])<<8
		out = append(out, b64Alphabet[v>>18&63], b64Alphabet[v>>12&63], b64Alphabet[v>>6&63], '=')
	}
	return string(out)
}

// b64Error is a malformed base64 input at byte Offset, as
// base64.CorruptInputError reports it.
type b64Error int64

func (e b64Error) Error() string {
	return "illegal base64 data at input byte " + strconv.FormatInt(int64(e), 10)
}

// b64Value is the 6-bit value of an alphabet byte, or -1.
func b64Value(c byte) int {
	switch {
	case c >= 'A' && c <= 'Z':
		return int(c - 'A')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 26
	case c >= '0' && c <= '9':
		return int(c-'0') + 52
	case c == '+':
		return 62
	case c == '/':
		return 63
	}
	return -1
}

// b64Decode is base64.StdEncoding.DecodeString: padded input, '\r' and
// '\n' ignored anywhere, nothing but line breaks after the padding, and
// the unused low bits of the last quantum ignored, as encoding/base64 does.
func b64Decode(s string) ([]byte, error) {
	out := make([]byte, 0, len(s)/4*3)
	var quad [4]int
	n := 0   // bytes of the current quantum
	pad := 0 // '=' seen in the current quantum
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			continue
		}
		if pad > 0 {
			if c != '=' {
				return nil, b64Error(i)
			}
		}
		switch {
		case c == '=':
			if n < 2 {
				return nil, b64Error(i)
			}
			pad++
			quad[n] = 0
		default:
			v := b64Value(c)
			if v < 0 {
				return nil, b64Error(i)
			}
			quad[n] = v
		}
		n++
		if n == 4 {
			v := quad[0]<<18 | quad[1]<<12 | quad[2]<<6 | quad[3]
			switch pad {
			case 0:
				out = append(out, byte(v>>16), byte(v>>8), byte(v))
			case 1:
				out = append(out, byte(v>>16), byte(v>>8))
			case 2:
				out = append(out, byte(v>>16))
			}
			n = 0
			if pad > 0 {
				// Only line breaks may follow the padding.
				for j := i + 1; j < len(s); j++ {
					if s[j] != '\r' && s[j] != '\n' {
						return nil, b64Error(j)
					}
				}
				return out, nil
			}
		}
	}
	if n != 0 {
		return nil, b64Error(len(s))
	}
	return out, nil
}
