package script

import (
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
)

// lsfBuiltin are LSF's built-in resources (load indices and static host
// resources): an rusage[] naming one of them, other than mem and the GPU
// counts, is accepted and ignored as before. Any other name in rusage[]
// is a site resource, which troupe takes as a license request (license
// blocks in partitions.hcl): schedd refuses a name the site does not
// define, as LSF refuses an unknown resource.
var lsfBuiltin = map[string]bool{
	"r15s": true, "r1m": true, "r15m": true, "ut": true, "pg": true, "io": true, "ls": true, "it": true,
	"tmp": true, "swp": true, "swap": true, "maxmem": true, "maxswp": true, "maxtmp": true,
	"ncpus": true, "nprocs": true, "ncores": true, "nthreads": true, "ndisks": true, "cpuf": true,
	"slots": true, "type": true, "model": true, "hname": true, "status": true, "server": true, "rexpri": true,
	"ngpus_shared": true, "ngpus_excl_t": true, "ngpus_excl_p": true,
}

// addLicense adds n of license name to the request.
func (o *Options) addLicense(name string, n int) {
	if o.Licenses == nil {
		o.Licenses = map[string]int{}
	}
	o.Licenses[name] += n
}

// licenseCount reads a license count: a whole number of at least 1.
func licenseCount(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		// LSF writes 1.0 for one as well.
		f, ferr := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if ferr != nil || f < 1 || f != float64(int(f)) {
			return 0, errors.New("a license count is a whole number of at least 1")
		}
		n = int(f)
	}
	return n, nil
}

// slurmLicenses reads sbatch -L/--licenses: name[:count] (count 1 when
// left out), several joined by ','. Slurm's '|' (any one of them) is
// refused: troupe's jobs hold all the licenses they name.
func slurmLicenses(o *Options, v string, _ site) error {
	if strings.Contains(v, "|") {
		return errors.New("troupe takes licenses that must all be free, joined by ','; '|' (any one of them) is not supported")
	}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, count, hasCount := strings.Cut(item, ":")
		n := 1
		if hasCount {
			var err error
			if n, err = licenseCount(count); err != nil {
				return fmt.Errorf("%s: %v", item, err)
			}
		}
		if name == "" {
			return fmt.Errorf("%s: want name[:count]", item)
		}
		o.addLicense(name, n)
	}
	return nil
}

// rusageItems are the name=value pairs of an rusage[] body: items joined
// by ',', each name=value pairs joined by ':' (mem=4000:matlab=1:duration=10).
func rusageItems(body string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for item := range strings.SplitSeq(body, ",") {
			for kv := range strings.SplitSeq(item, ":") {
				if !yield(kv) {
					return
				}
			}
		}
	}
}
