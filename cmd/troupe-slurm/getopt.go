package main

import (
	"fmt"
	"strings"
)

// option is one option of a Slurm command: its short letter (0: none),
// long name (without --) and whether it takes a value.
type option struct {
	short byte
	long  string
	arg   bool
}

// given is an option as given: its long name (or the letter of an
// option with none) and value.
type given struct {
	name, value string
}

// getopt reads args as Slurm's commands do (getopt_long): --name=value,
// --name value, a unique prefix of a long name, -x value, -xvalue, and
// letters grouped (-nu USER). "--" ends the options. With stopAtFirst
// (sbatch, srun) the options end at the first other argument, which
// belongs to the script or command; otherwise options and arguments may
// mix. lookup, when not nil, is asked about a long or short name the
// table does not hold (sbatch's job options).
func getopt(args []string, opts []option, stopAtFirst bool, lookup func(name string) (long string, ok, arg bool)) ([]given, []string, error) {
	var out []given
	var rest []string
	find := func(name string) (string, bool, bool, error) {
		if strings.HasPrefix(name, "--") {
			long := name[2:]
			var match *option
			for i := range opts {
				if opts[i].long == long {
					return opts[i].long, true, opts[i].arg, nil
				}
			}
			if lookup != nil {
				if l, ok, arg := lookup(name); ok {
					return l, true, arg, nil
				}
			}
			for i := range opts {
				if opts[i].long != "" && strings.HasPrefix(opts[i].long, long) {
					if match != nil {
						return "", false, false, fmt.Errorf("option '%s' is ambiguous", name)
					}
					match = &opts[i]
				}
			}
			if match == nil {
				return "", false, false, fmt.Errorf("unrecognized option '%s'", name)
			}
			return match.long, true, match.arg, nil
		}
		for i := range opts {
			if opts[i].short == name[1] {
				n := opts[i].long
				if n == "" {
					n = name[1:]
				}
				return n, true, opts[i].arg, nil
			}
		}
		if lookup != nil {
			if l, ok, arg := lookup(name); ok {
				return l, true, arg, nil
			}
		}
		return "", false, false, fmt.Errorf("invalid option -- '%c'", name[1])
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return out, append(rest, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a, "=")
			long, _, arg, err := find(name)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case arg && !hasValue:
				if i+1 >= len(args) {
					return nil, nil, fmt.Errorf("option '--%s' requires an argument", long)
				}
				i++
				value = args[i]
			case !arg && hasValue:
				return nil, nil, fmt.Errorf("option '--%s' doesn't allow an argument", long)
			}
			out = append(out, given{long, value})
		case len(a) > 1 && a[0] == '-':
			for k := 1; k < len(a); k++ {
				long, _, arg, err := find("-" + string(a[k]))
				if err != nil {
					return nil, nil, err
				}
				if !arg {
					out = append(out, given{long, ""})
					continue
				}
				value := a[k+1:]
				if value == "" {
					if i+1 >= len(args) {
						return nil, nil, fmt.Errorf("option requires an argument -- '%c'", a[k])
					}
					i++
					value = args[i]
				}
				out = append(out, given{long, value})
				break
			}
		default:
			if stopAtFirst {
				return out, append(rest, args[i:]...), nil
			}
			rest = append(rest, a)
		}
	}
	return out, rest, nil
}
