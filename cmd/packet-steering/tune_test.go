package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestTuneRefusesWithoutTarget(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no target", []string{"tune"}, "--target HOST is required"},
		{"loopback target", []string{"tune", "--target", "127.0.0.1"}, "loopback"},
		{"multicast target", []string{"tune", "--target", "239.1.1.1"}, "more than one host"},
		{"bad runs", []string{"tune", "--target", "198.18.0.1", "--runs", "0"}, "--runs"},
		{"bad candidates", []string{"tune", "--target", "198.18.0.1", "--root", "/nonexistent", "--candidates", "fast"}, "not a mode"},
		{"stray argument", []string{"tune", "--target", "198.18.0.1", "extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}, tt.args)
			if code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.want)
			}
		})
	}
}

func TestTuneHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), &cliEnv{stdout: &out, stderr: &errb}, []string{"tune", "-h"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--target", "--candidates", "DEV:MASK", "max-duration", "save"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
