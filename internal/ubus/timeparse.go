package ubus

import (
	"errors"
	"time"
)

// parseTime reads a time.Time as time.Time's MarshalText writes it (RFC
// 3339 with optional fractional seconds). The codec does not call
// time.Time's UnmarshalText: that keeps the time package's layout parser
// (about 20 KB on mipsle) out of the router binary. timeparse_test.go checks
// it against UnmarshalText.
func parseTime(s string) (time.Time, error) {
	bad := errors.New("bad RFC 3339 time " + quoteShort(s))
	num := func(i, n int) (int, bool) {
		if i+n > len(s) {
			return 0, false
		}
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, bad
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(time.Month(month), year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, bad
	}
	i, nsec := 19, 0
	if i < len(s) && (s[i] == '.' || s[i] == ',') {
		i++
		digits := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if digits < 9 { // further digits are cut off, as time does
				nsec = nsec*10 + int(s[i]-'0')
			}
			digits++
			i++
		}
		if digits == 0 {
			return time.Time{}, bad
		}
		for d := min(digits, 9); d < 9; d++ {
			nsec *= 10
		}
	}
	rest := s[i:]
	switch {
	case rest == "Z":
		return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), nil
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, okh := num(i+1, 2)
		om, okm := num(i+4, 2)
		// time accepts offsets up to 24:60.
		if !okh || !okm || oh > 24 || om > 60 {
			return time.Time{}, bad
		}
		off := oh*3600 + om*60
		if rest[0] == '-' {
			off = -off
		}
		t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC).Add(-time.Duration(off) * time.Second)
		return t.In(time.FixedZone("", off)), nil
	}
	return time.Time{}, bad
}

// daysIn is the number of days of month m in year y.
func daysIn(m time.Month, y int) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// quoteShort quotes s for an error message, cut to 40 bytes.
func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return `"` + s + `"`
}
