package main

import (
	"errors"
	"flag"
	"io"
	"os"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// newFlagSet returns the flag set of one subcommand, reporting to stderr.
// The caller sets Usage.
func newFlagSet(env *cliEnv, name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	return fs
}

// parseFlags parses the arguments of a subcommand that takes no positional
// ones. help is true when -h or --help was given (the usage has been
// printed; the command should return nil); a bad flag or a stray argument
// is a usageError.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return false, usagef("unexpected argument %q", fs.Arg(0))
	}
	return false, nil
}

// checkRoot refuses a --root that is not an existing directory before
// anything reads or writes below it.
func checkRoot(root string) error {
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return usagef("--root %s: not an existing directory", root)
	}
	return nil
}

// writeJSON writes v (a struct with json tags) as indented JSON, the
// --json output of every command: the text encoding/json's Encoder with a
// two-space indent writes, produced without that package (it would not fit
// the router binary's size budget).
func writeJSON(w io.Writer, v any) error {
	attrs, err := ubus.AttrsFromValue(v)
	if err != nil {
		return err
	}
	out := append(ubus.AttrsToStdJSON(attrs, "  "), '\n')
	_, err = w.Write(out)
	return err
}
