package tune

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--target", "198.18.0.2"}, ""},
		{[]string{"--target", "198.18.0.2", "-u", "-b", "900M", "-l", "1200", "--bidir", "-t", "10", "-P", "4", "--metric", "loss"}, ""},
		{[]string{}, "--target HOST is required"},
		{[]string{"--target", "198.18.0.2", "--metric", "loss"}, "needs --udp"},
		{[]string{"--target", "198.18.0.2", "-u", "--metric", "retransmits"}, "needs TCP"},
		{[]string{"--target", "198.18.0.2", "--metric", "speed"}, "want throughput"},
		{[]string{"--target", "198.18.0.2", "-t", "0"}, "--time"},
		{[]string{"--target", "198.18.0.2", "-P", "0"}, "--parallel"},
		{[]string{"--target", "198.18.0.2", "--port", "70000"}, "--port"},
		{[]string{"--target", "198.18.0.2", "--cport", "65530"}, "--cport"},
		{[]string{"--target", "198.18.0.2", "--max-configs", "0"}, "--max-configs"},
		{[]string{"--target", "198.18.0.2", "--max-duration", "0s"}, "--max-duration"},
		{[]string{"--target", "198.18.0.2", "--bidir", "-R"}, "exclude each other"},
		{[]string{"--target", "198.18.0.2", "--candidates", "off", "--devices", "eth0"}, "--devices only"},
		{[]string{"--target", "198.18.0.2", "--nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := ParseFlags(tt.args, io.Discard)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want a usage error saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestResolveTarget(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{"198.18.0.2", "198.18.0.2", ""},
		{"2001:db8::1", "2001:db8::1", ""},
		{"0.0.0.0", "", "unspecified"},
		{"::", "", "unspecified"},
		{"255.255.255.255", "", "more than one host"},
		{"224.0.0.1", "", "more than one host"},
		{"ff02::1", "", "more than one host"},
		{"127.0.0.1", "", "loopback"},
		{"localhost", "", "loopback"},
		{"no-such-host.invalid", "", "resolve"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ip, err := ResolveTarget(context.Background(), tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want error %q", ip, err, tt.wantErr)
				}
				return
			}
			if err != nil || ip.String() != tt.want {
				t.Errorf("got %v, %v; want %s", ip, err, tt.want)
			}
		})
	}
}

func TestSaveRefusesTiesAndUnverifiedRestores(t *testing.T) {
	o := &Options{Root: t.TempDir()}
	tests := []struct {
		name string
		rep  Report
		want string
	}{
		{"nothing measured", Report{}, "nothing to save"},
		{"restore not verified", Report{Recommendation: Recommendation{Candidate: "auto", Clear: true}}, "restore was not verified"},
		{"tie", Report{Recommendation: Recommendation{Candidate: "off", Best: "off", Tied: []string{"eth0:2"}},
			Restore: RestoreResult{Verified: true}}, "tied with eth0:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A nil engine: the refusal must come before anything is written.
			err := o.save(context.Background(), nil, &tt.rep, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
