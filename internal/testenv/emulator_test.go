package testenv

import (
	"fmt"
	"os"
	"reflect"
	"testing"
)

func TestMain(m *testing.M) {
	Main(m, map[string]func() int{
		"echo": func() int { fmt.Print("helper ran"); return 0 },
	})
}

func TestArgv(t *testing.T) {
	tests := []struct {
		name     string
		emu      string
		wantName string
		wantArgs []string
	}{
		{"native", "", "/bin/x.test", []string{"-test.run=^A$"}},
		{"emulated", "/usr/bin/qemu-mipsel", "/usr/bin/qemu-mipsel", []string{"/bin/x.test", "-test.run=^A$"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EmulatorEnv, tt.emu)
			name, args := Argv("/bin/x.test", "-test.run=^A$")
			if name != tt.wantName || !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("Argv = %q %q, want %q %q", name, args, tt.wantName, tt.wantArgs)
			}
		})
	}
}

// The test binary starts itself again as a helper, natively or under the
// emulator that runs it (make test-cross, where this fails with "exec
// format error" if the emulator is left out).
func TestHelperCommandRunsSelf(t *testing.T) {
	t.Logf("emulator: %q", os.Getenv(EmulatorEnv))
	cmd, err := HelperCommand("echo")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "helper ran" {
		t.Fatalf("helper: %v, output %q", err, out)
	}
}
