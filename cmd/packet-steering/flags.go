package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
)

// subcommand is the scaffold every subcommand reads its command line with:
// one flag set reporting to stderr, the shared flags (--root, --json), the
// usage text, and the checks that turn every bad input into a usageError
// (exit status 2) before anything below the root is read.
type subcommand struct {
	_     outline.NoCompare
	fs    *flag.FlagSet
	env   *cliEnv
	usage string // the synopsis after "usage: packet-steering "
	about string // optional lines under the synopsis
	root  *string
	json  *bool
	// minArgs and maxArgs bound the positional arguments (both 0 unless
	// the command sets them).
	minArgs, maxArgs int
}

// newSubcommand starts the scaffold of one subcommand. usage is the
// synopsis ("plan [--root DIR] ..."), about what the command does, in one
// or a few lines ("" for none).
//
//go:noinline
func newSubcommand(env *cliEnv, name, usage, about string) *subcommand {
	c := &subcommand{fs: flag.NewFlagSet(name, flag.ContinueOnError), env: env, usage: usage, about: about}
	c.fs.SetOutput(env.stderr)
	c.fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: packet-steering "+c.usage)
		if c.about != "" {
			fmt.Fprintln(env.stderr, c.about)
		}
		c.fs.PrintDefaults()
	}
	return c
}

// withRoot adds --root DIR (default "/"): the machine is read (and written)
// below it. parse refuses a root that is not an existing directory.
//
//go:noinline
func (c *subcommand) withRoot() *subcommand {
	c.root = c.fs.String("root", "/", "machine root `DIR` (a fixture root in tests)")
	return c
}

// withJSON adds --json; what says what is printed as JSON.
//
//go:noinline
func (c *subcommand) withJSON(what string) *subcommand {
	c.json = c.fs.Bool("json", false, what)
	return c
}

// withArgs allows between min and max positional arguments.
func (c *subcommand) withArgs(min, max int) *subcommand {
	c.minArgs, c.maxArgs = min, max
	return c
}

// parse reads args. help is true when -h or --help was given (the usage has
// been printed; the command returns nil). A bad flag, a wrong number of
// arguments or a --root that is not a directory is a usageError.
func (c *subcommand) parse(args []string) (help bool, err error) {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, usagef("%v", err)
	}
	switch n := c.fs.NArg(); {
	case n > c.maxArgs:
		c.fs.Usage()
		return false, usagef("unexpected argument %q", c.fs.Arg(c.maxArgs))
	case n < c.minArgs:
		c.fs.Usage()
		return false, usagef("want at least %d argument(s)", c.minArgs)
	}
	if c.root != nil {
		if fi, err := os.Stat(*c.root); err != nil || !fi.IsDir() {
			return false, usagef("--root %s: not an existing directory", *c.root)
		}
	}
	return false, nil
}

// given reports whether the flag name was set on the command line.
func (c *subcommand) given(name string) bool {
	found := false
	c.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// rootDir is the --root value ("/" when the command has no --root).
func (c *subcommand) rootDir() string {
	if c.root == nil {
		return "/"
	}
	return *c.root
}

// output writes v as JSON when --json was given, else through human. what
// names the output in a write error ("status", "plan").
func (c *subcommand) output(what string, v any, human func(io.Writer) error) error {
	var err error
	if c.json != nil && *c.json {
		err = writeJSON(c.env.stdout, v)
	} else {
		err = human(c.env.stdout)
	}
	if err != nil {
		return outline.Errorf("write %s: %w", what, err)
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
