// Package cli parses a command's flags the same way in every seckill
// binary: help goes to stdout and exits 0 with no side effect; a usage error
// goes to stderr and exits 2.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Parse parses args into fs (whose Usage is set); arguments after the
// flags are a usage error. When done is true the command must exit with
// code and do nothing else.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	if code, done := ParseArgs(fs, args, stdout, stderr); done {
		return code, done
	}
	if fs.NArg() > 0 {
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		fs.Usage()
		return 2, true
	}
	return 0, false
}

// ParseArgs is Parse for a command that takes arguments after its flags
// (fs.Args()).
func ParseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0, true
		}
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		fs.Usage()
		return 2, true
	}
	return 0, false
}
