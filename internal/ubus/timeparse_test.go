package ubus

import (
	"testing"
	"time"
)

var timeCases = []string{
	"2026-11-30T03:04:05Z", "2026-11-30T03:04:05.123456789Z", "2026-11-30T03:04:05.1+01:00",
	"2026-11-30T03:04:05-07:30", "2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2026-13-01T00:00:00Z",
	"2026-11-30T24:00:00Z", "2026-11-30T23:60:00Z", "2026-11-30T23:59:60Z", "2026-11-30T03:04:05.Z",
	"2026-11-30T03:04:05.1234567891Z", "2026-11-30t03:04:05Z", "2026-11-30T03:04:05z", "2026-11-30T03:04:05+24:00",
	"2026-11-30T03:04:05+1:00", "2026-11-30T03:04:05", "yesterday", "", "0000-01-01T00:00:00Z",
	"2026-11-30T03:04:05,5Z", "2026-11-30T03:04:05+01:60", "2026-11-30 03:04:05Z", "+026-11-30T03:04:05Z",
}

// TestParseTimeAgreesWithUnmarshalText: what parseTime accepts,
// time.Time.UnmarshalText accepts with the same instant and offset, and
// parseTime reads everything MarshalText writes.
func TestParseTimeAgreesWithUnmarshalText(t *testing.T) {
	for _, s := range timeCases {
		checkTime(t, s)
	}
	now := time.Date(2026, 11, 30, 3, 4, 5, 120000000, time.FixedZone("x", -5*3600))
	b, _ := now.MarshalText()
	checkTime(t, string(b))
}

func checkTime(t *testing.T, s string) {
	t.Helper()
	got, err := parseTime(s)
	var want time.Time
	werr := want.UnmarshalText([]byte(s))
	if err != nil {
		// time's fallback parser is more lenient than RFC 3339 (a
		// one-digit hour, say); what MarshalText writes must be read.
		if canon, _ := want.MarshalText(); werr == nil && string(canon) == s {
			t.Fatalf("parseTime(%q): %v; UnmarshalText reads it and MarshalText writes it", s, err)
		}
		return
	}
	if werr != nil {
		t.Fatalf("parseTime(%q) accepts what UnmarshalText refuses (%v)", s, werr)
	}
	_, goff := got.Zone()
	_, woff := want.Zone()
	if !got.Equal(want) || goff != woff {
		t.Fatalf("parseTime(%q) = %v, UnmarshalText %v", s, got, want)
	}
}

// FuzzParseTime: parseTime and time.Time.UnmarshalText agree on any input
// (see checkTime).
func FuzzParseTime(f *testing.F) {
	for _, s := range timeCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkTime(t, s) })
}
