// Package testenv is how the project's tests skip for want of something in
// their environment (root, a tool, a network namespace, a kernel file) and
// how CI makes sure that never happens silently: with
// PACKET_STEERING_REQUIRE_KERNEL=1 in the environment (.ci/run sets it),
// every such skip fails the test instead, so a green CI run proves that the
// kernel tests ran.
//
// Every environment skip goes through Skipf (or NeedRoot, NeedTool, Short),
// never through a bare t.Skip. It is for tests only; no program imports it.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireKernelEnv is the environment variable that turns environment
// skips into failures when set to "1".
const RequireKernelEnv = "PACKET_STEERING_REQUIRE_KERNEL"

// Required reports whether environment skips are failures in this run.
func Required() bool { return os.Getenv(RequireKernelEnv) == "1" }

// Skipf skips t because its environment lacks what the test needs, or,
// when Required, fails it with the same message.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("environment skip with "+RequireKernelEnv+"=1: "+format, args...)
	}
	t.Skipf(format, args...)
}

// NeedRoot skips (see Skipf) unless the process runs as root.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skipf(t, "needs root")
	}
}

// NeedTool returns the path of the program name, or skips (see Skipf)
// when it is not on PATH.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skipf(t, "needs %s: %v", name, err)
	}
	return p
}

// Short skips a kernel or timing test under -short. Under Required it
// fails instead: -short and a run that must prove its kernel tests ran
// contradict each other.
func Short(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		Skipf(t, "%s skipped with -short", what)
	}
}

// OptIn returns the value of the environment variable env, which a person
// sets to run a test that needs what CI does not have (what says what to
// set it to). Unset or empty, the test is skipped with a message naming
// env and what; that skip is a choice, not a want of the environment, so
// Required does not turn it into a failure. Set, the test runs, and what
// the value names must work: the test fails otherwise.
func OptIn(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("opt-in test: set %s to %s to run it", env, what)
	}
	return v
}

// StockUCIEnv names the stock uci binary (openwrt/uci's command line
// tool, built locally: OpenWrt has it, CI does not) for the tests that race
// it against this project's commits.
const StockUCIEnv = "PACKET_STEERING_STOCK_UCI"

// StockUCI returns the path of the stock uci binary StockUCIEnv names, or
// skips t when it is not set (see OptIn); a value that is not an
// executable fails t.
func StockUCI(t testing.TB) string {
	t.Helper()
	v := OptIn(t, StockUCIEnv, "the path of a stock uci binary (openwrt/uci)")
	if v == "" {
		return ""
	}
	p, err := exec.LookPath(v)
	if err != nil {
		t.Fatalf("%s=%s: %v", StockUCIEnv, v, err)
	}
	return p
}

// HelperEnv names, in a re-executed test binary's environment, the helper
// process it is to be instead of running tests.
const HelperEnv = "PACKET_STEERING_TEST_HELPER"

// Main is the TestMain of a package whose tests start helper processes:
// when HelperEnv names one of helpers, the binary runs that helper and exits
// with the status it returns; otherwise it runs the tests. A helper is thus
// never a test that skips itself in every normal run.
func Main(m *testing.M, helpers map[string]func() int) {
	if name := os.Getenv(HelperEnv); name != "" {
		h, ok := helpers[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "testenv: no helper process %q\n", name)
			os.Exit(2)
		}
		os.Exit(h())
	}
	os.Exit(m.Run())
}

// HelperCommand returns a command that re-executes this test binary as the
// helper name (see Main), with env added to this process's environment.
// Under an emulator (see EmulatorEnv) the helper runs under it too.
func HelperCommand(name string, env ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("test binary: %w", err)
	}
	cmd := Command(exe)
	cmd.Env = append(append(os.Environ(), HelperEnv+"="+name), env...)
	return cmd, nil
}

// Exit turns a helper's error into its exit status: 0 for nil, else 1
// after printing the error to stderr.
func Exit(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// EmulatorEnv names the user-mode emulator (an absolute path, such as
// /usr/bin/qemu-mipsel) that runs this test binary; unset or empty means
// it runs natively. `make test-cross` builds the tests for the router
// architectures and runs them under qemu-user through
// scripts/cross-exec.sh, which sets it. A foreign test binary started
// again directly fails with "exec format error" unless binfmt_misc has the
// emulator registered, which a container or a fresh machine may not have;
// Command starts it through the same emulator instead.
const EmulatorEnv = "PACKET_STEERING_TEST_EMULATOR"

// Emulator returns the emulator this test binary runs under, or "" when it
// runs natively.
func Emulator() string { return os.Getenv(EmulatorEnv) }

// Argv returns the program and arguments that run name (a program built
// for the test's architecture, in practice the test binary itself) with
// args: unchanged natively, the emulator with name prepended to args under
// one. For commands handed to another program (`ip netns exec`).
func Argv(name string, args ...string) (string, []string) {
	emu := Emulator()
	if emu == "" {
		return name, args
	}
	return emu, append([]string{name}, args...)
}

// Command is exec.Command for a program built for the test's architecture
// (see Argv).
func Command(name string, args ...string) *exec.Cmd {
	name, args = Argv(name, args...)
	return exec.Command(name, args...)
}
