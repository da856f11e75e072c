package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/script"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// overrides are bsub's LSF-style flags that change the parsed job file.
// Each is validated on its own with jobspec's Validate, so an error names
// the flag that caused it.
type overrides struct {
	partition, name, walltime, output, account string
	qos                                        string
	reservation                                string // -U
	errorFile                                  string
	array                                      string // --array
	warnAction, warnTime                       string // -wa, -wt
	size                                       int
	sizeSet                                    bool // -n given, even as 0
	env                                        cli.StringList
}

// parsed notes which flags were given, once fs is parsed.
func (o *overrides) parsed(fs *cli.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "n" || f.Name == "cluster-size" {
			o.sizeSet = true
		}
	})
}

func (o *overrides) define(fs *cli.FlagSet) {
	fs.StringVar(&o.partition, "q", "", "submit to `partition` instead of the job file's (LSF -q, Slurm --partition)")
	fs.Alias("partition", "q")
	fs.IntVar(&o.size, "n", 0, "cluster size: the number of `containers`, main1 included (overrides cluster.size)")
	fs.Alias("cluster-size", "n")
	fs.StringVar(&o.name, "J", "", "job `name` (overrides the job block's label); LSF's \"name[1-100%10]\" makes the job an\narray of elements 1 to 100, at most 10 running at once (also [1,3,5-9:2])")
	fs.StringVar(&o.array, "array", "", "make the job an array of these `indices`, Slurm's 1-100:2%10 (a step of 2, at most\n10 running at once) or 1,3,5-9 (overrides the job file's array block)")
	fs.StringVar(&o.walltime, "W", "", "walltime `limit`: LSF's [HH:]MM (\"90\", \"1:30\"), days-HH:MM:SS or a duration\n(\"2h\", \"1d12h\"); overrides walltime")
	fs.StringVar(&o.output, "o", "", "output file `pattern` of each container, stdout and stderr together: %j (or LSF's\n%J) job id, %h container host, %u user, %x job name (overrides output)")
	fs.StringVar(&o.errorFile, "e", "", "error file `pattern`: each container's stderr goes there instead of joining\nstdout in the output file; the same % escapes as -o (overrides error)")
	fs.StringVar(&o.account, "P", "", "fair-share `account` to charge (LSF -P project, Slurm -A)")
	fs.StringVar(&o.qos, "qos", "", "quality of service (partitions.hcl qos); -q is the queue, the partition")
	fs.Alias("A", "P")
	fs.StringVar(&o.warnAction, "wa", "", "warning `signal` (USR1, TERM, ...) sent to every container -wt before the walltime\nends and when the job is chosen to be preempted (LSF -wa; overrides signal)")
	fs.StringVar(&o.warnTime, "wt", "", "how long before the walltime ends -wa's signal comes: `[hours:]minutes` (LSF -wt)")
	fs.StringVar(&o.reservation, "U", "", "run in the advance `reservation` (LSF -U, Slurm --reservation): only on its nodes,\nwhile its window is open (overrides reservation)")
	fs.Alias("reservation", "U")
	fs.Var(&o.env, "env", "set `NAME=value` in every container's environment (repeatable; overrides env)")
}

// apply changes spec as the flags say, in a fixed order, checking each
// change with spec.Validate.
func (o *overrides) apply(spec *jobspec.Job) error {
	type change struct {
		flag, value, path string
		set               func() error
	}
	var changes []change
	if o.partition != "" {
		changes = append(changes, change{"-q", o.partition, "partition", func() error { spec.Partition = o.partition; return nil }})
	}
	if o.sizeSet {
		changes = append(changes, change{"-n", strconv.Itoa(o.size), "cluster.size", func() error { return setSize(spec, o.size) }})
	}
	if o.name != "" {
		changes = append(changes, change{"-J", o.name, "name", func() error {
			name, rng, isArray := jobspec.SplitArrayName(o.name)
			spec.Name = name
			if isArray {
				a, err := jobspec.ArrayFromSpec(rng)
				if err != nil {
					return err
				}
				spec.Array = a
			}
			return nil
		}})
	}
	if o.array != "" {
		changes = append(changes, change{"--array", o.array, "array", func() error { return o.applyArray(spec) }})
	}
	if o.walltime != "" {
		changes = append(changes, change{"-W", o.walltime, "walltime", func() error {
			d, err := script.ParseLSFWalltime(o.walltime)
			if err != nil {
				return err
			}
			spec.Walltime = d
			return nil
		}})
	}
	if o.warnAction != "" || o.warnTime != "" {
		changes = append(changes, change{"-wa", o.warnAction + " -wt " + o.warnTime, "signal", func() error {
			w, err := jobspec.ParseLSFWarning(o.warnAction, o.warnTime)
			spec.Signal = w
			return err
		}})
	}
	if o.output != "" {
		changes = append(changes, change{"-o", o.output, "output", func() error {
			spec.Output = script.ExpandName(script.LSFPattern(o.output), spec.Name)
			return nil
		}})
	}
	if o.errorFile != "" {
		changes = append(changes, change{"-e", o.errorFile, "error", func() error {
			spec.Error = script.ExpandName(script.LSFPattern(o.errorFile), spec.Name)
			return nil
		}})
	}
	if o.account != "" {
		changes = append(changes, change{"-P", o.account, "account", func() error { spec.Account = o.account; return nil }})
	}
	if o.qos != "" {
		changes = append(changes, change{"--qos", o.qos, "qos", func() error { spec.QOS = o.qos; return nil }})
	}
	if o.reservation != "" {
		changes = append(changes, change{"-U", o.reservation, "reservation", func() error { spec.Reservation = o.reservation; return nil }})
	}
	for _, kv := range o.env {
		k, v, ok := strings.Cut(kv, "=")
		changes = append(changes, change{"--env", kv, "env." + k, func() error {
			if !ok || k == "" {
				return errors.New("want NAME=value")
			}
			if spec.Env == nil {
				spec.Env = map[string]string{}
			}
			spec.Env[k] = v
			return nil
		}})
	}
	for _, c := range changes {
		if err := c.set(); err != nil {
			return fmt.Errorf("%s %s: %v", c.flag, c.value, err)
		}
		// The setting no longer comes from the file: errors must not
		// point there.
		delete(spec.Ranges, c.path)
		if diags := spec.Validate(); diags.HasErrors() {
			return fmt.Errorf("%s %s: %s", c.flag, c.value, firstError(diags))
		}
	}
	return nil
}

// applyArray makes spec the array --array asks for (nothing without it).
func (o *overrides) applyArray(spec *jobspec.Job) error {
	if o.array == "" {
		return nil
	}
	a, err := jobspec.ArrayFromSpec(o.array)
	if err != nil {
		return err
	}
	spec.Array = a
	return nil
}

// setSize sets the cluster size; a sub role's replicas follow, as when
// the file's size is changed.
func setSize(spec *jobspec.Job, n int) error {
	others := 0
	for _, r := range spec.Roles {
		if r.Name != jobspec.RoleMain && r.Name != jobspec.RoleSub {
			others += r.Replicas
		}
	}
	spec.Cluster.Size = n
	for i, r := range spec.Roles {
		if r.Name == jobspec.RoleSub {
			spec.Roles[i].Replicas = max(n-1-others, 0)
		}
	}
	return nil
}

func firstError(diags hcl.Diagnostics) string {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			if d.Detail != "" {
				return d.Detail
			}
			return d.Summary
		}
	}
	return diags.Error()
}

// dryRunFlag is --dry-run (a table) or --dry-run=json.
type dryRunFlag struct {
	on     bool
	format cli.Format
}

func (d *dryRunFlag) IsBoolFlag() bool { return true }

func (d *dryRunFlag) String() string {
	if d == nil || !d.on {
		return ""
	}
	return string(d.format)
}

func (d *dryRunFlag) Set(s string) error {
	switch s {
	case "true", "table":
		d.on, d.format = true, cli.FormatTable
	case "json":
		d.on, d.format = true, cli.FormatJSON
	case "false":
		d.on = false
	default:
		return errors.New("want --dry-run or --dry-run=json")
	}
	return nil
}

// verdictWait bounds how long --dry-run waits for schedd's verdict.
var verdictWait = 5 * time.Second

// dryRun shows req and schedd's verdict on it, submitting nothing: schedd
// runs submit's own admission (POST /v1/jobs/check). Without schedd, or
// with one too old for the check, it says why the verdict is missing,
// and the dry run still succeeds. It exits 1 when schedd would refuse
// the job.
func dryRun(ctx context.Context, c *client.Client, req api.SubmitRequest, format cli.Format, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, verdictWait)
	defer cancel()
	v := verdict(ctx, c, req)
	var err error
	if format == cli.FormatJSON {
		err = cli.WriteJSON(stdout, cli.DryRun{Submit: req, Verdict: v})
	} else {
		spec := wire.FromAPI(req.Spec)
		err = cli.WriteDryRun(stdout, req, spec.Hosts(), v)
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	if v.Checked && !v.OK {
		return cli.Fail(stderr, prog, fmt.Errorf("dry run: schedd would refuse the job: %s", strings.Join(v.Problems, "; ")))
	}
	return cli.ExitOK
}

// verdict asks schedd to run submit's admission on req: its answer, its
// problems (placed in the job file by the positions req carries) and
// its notes are the verdict, with nothing judged here.
func verdict(ctx context.Context, c *client.Client, req api.SubmitRequest) cli.Verdict {
	chk, err := c.CheckSubmit(ctx, req)
	var ae *client.APIError
	switch {
	case err == nil:
		return cli.Verdict{Checked: true, BySchedd: true, OK: true, Partition: chk.Partition, Notes: chk.Notes}
	case errors.As(err, &ae) && (ae.Status == http.StatusMethodNotAllowed || ae.Status == http.StatusNotFound && strings.HasPrefix(ae.Message, "404 page not found")):
		return cli.Verdict{Error: fmt.Sprintf("schedd at %s has no POST /v1/jobs/check, the check --dry-run asks for; it is older than this bsub", c.Addr())}
	case errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusUnauthorized:
		part := req.Spec.Partition
		if part == "" {
			part = "(schedd's default)"
		}
		v := cli.Verdict{Checked: true, BySchedd: true, Partition: part}
		for _, p := range ae.Problems {
			v.Problems = append(v.Problems, p.String())
		}
		if len(v.Problems) == 0 { // a refusal of the request itself
			v.Problems = []string{strings.TrimPrefix(ae.Message, "invalid request: ")}
		}
		return v
	}
	return cli.Verdict{Error: unchecked(c, err)}
}

// unchecked says why schedd gave no verdict.
func unchecked(c *client.Client, err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("schedd at %s did not answer in %s", c.Addr(), verdictWait)
	}
	return err.Error()
}
