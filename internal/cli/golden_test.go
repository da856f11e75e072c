package cli_test

import (
	"bytes"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/cli/*.golden from the current output")

// dryRunTaken is schedd's verdict on clitest.Submission, as POST
// /v1/jobs/check gives it.
var dryRunTaken = cli.Verdict{Checked: true, BySchedd: true, OK: true, Partition: "gpu",
	Notes: []string{"the job needs more than partition gpu's up nodes hold (8 cpu, 32 GiB memory, 1 gpu)"}}

// golden compares got with testdata/cli/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := clitest.GoldenPath(name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./internal/cli -update rewrites it)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestGolden(t *testing.T) {
	now := clitest.Now
	tests := []struct {
		name   string
		render func(*bytes.Buffer) error
	}{
		{"queue.golden", func(b *bytes.Buffer) error { return cli.WriteQueue(b, clitest.Jobs(), now) }},
		{"queue_empty.golden", func(b *bytes.Buffer) error { return cli.WriteQueue(b, nil, now) }},
		{"queue.json.golden", func(b *bytes.Buffer) error { return cli.WriteJSON(b, cli.SortJobs(clitest.Jobs())) }},
		{"job_running.golden", func(b *bytes.Buffer) error { return cli.WriteJob(b, clitest.Job(12), now) }},
		{"job_pending.golden", func(b *bytes.Buffer) error { return cli.WriteJob(b, clitest.Job(15), now) }},
		{"job_dependency.golden", func(b *bytes.Buffer) error { return cli.WriteJob(b, clitest.DependentJob(), now) }},
		{"job_failed.golden", func(b *bytes.Buffer) error { return cli.WriteJob(b, clitest.Job(7), now) }},
		{"job_cancelled.golden", func(b *bytes.Buffer) error { return cli.WriteJob(b, clitest.Job(9), now) }},
		{"job.json.golden", func(b *bytes.Buffer) error { return cli.WriteJSON(b, clitest.Job(12)) }},
		{"queue_wide.golden", func(b *bytes.Buffer) error {
			return cli.WriteJobColumns(b, cli.SortQueue(clitest.Jobs()), cli.MustColumns(cli.WideColumns), now)
		}},
		{"queue_columns.golden", func(b *bytes.Buffer) error {
			cols, err := cli.LookupColumns("jobid,stat user  queue,time_limit,exit_code,end_time")
			if err != nil {
				return err
			}
			return cli.WriteJobColumns(b, cli.SortQueue(clitest.Jobs()), cols, now)
		}},
		{"queue_start.golden", func(b *bytes.Buffer) error { return cli.WriteQueueStart(b, clitest.Jobs(), now) }},
		{"dryrun.golden", func(b *bytes.Buffer) error {
			return cli.WriteDryRun(b, clitest.Submission(), hostsOf(clitest.Submission()), dryRunTaken)
		}},
		{"dryrun_refused.golden", func(b *bytes.Buffer) error {
			req := clitest.Submission()
			req.Spec.Walltime, req.Spec.Cluster.Size, req.Spec.Account = 100*time.Hour, 64, "physics"
			return cli.WriteDryRun(b, req, hostsOf(req), cli.Verdict{Checked: true, BySchedd: true, Partition: "gpu", Problems: []string{
				"train.hcl:7:3: walltime 4-04:00:00 exceeds partition gpu's limit of 3-00:00:00 (max_walltime)",
				"cluster size 64 exceeds partition gpu's limit of 16 (max_cluster_size)",
			}})
		}},
		{"dryrun_unchecked.golden", func(b *bytes.Buffer) error {
			return cli.WriteDryRun(b, clitest.Submission(), hostsOf(clitest.Submission()), cli.Verdict{Error: "cannot reach schedd at unix:///run/troupe/schedd.sock: connect: no such file or directory"})
		}},
		{"dryrun.json.golden", func(b *bytes.Buffer) error {
			return cli.WriteJSON(b, cli.DryRun{Submit: clitest.Submission(), Verdict: dryRunTaken})
		}},
		{"history.golden", func(b *bytes.Buffer) error { return cli.WriteHistory(b, clitest.History(), now.Location()) }},
		{"history_long.golden", func(b *bytes.Buffer) error { return cli.WriteHistoryLong(b, clitest.History(), now.Location()) }},
		{"history.json.golden", func(b *bytes.Buffer) error { return cli.WriteJSON(b, clitest.History()) }},
		{"hosts.golden", func(b *bytes.Buffer) error { return cli.WriteHosts(b, clitest.Nodes()) }},
		{"hosts_long.golden", func(b *bytes.Buffer) error { return cli.WriteHostsLong(b, clitest.Nodes(), time.UTC) }},
		// Slurm 22.05's squeue, sacct and sinfo.
		{"squeue.golden", func(b *bytes.Buffer) error {
			var live []api.Job
			for _, j := range cli.SortJobs(clitest.Jobs()) {
				if !j.State.Terminal() {
					live = append(live, j)
				}
			}
			return cli.WriteSqueue(b, live, mustSqueue(cli.SqueueDefaultFormat), true, now)
		}},
		{"squeue_h_o.golden", func(b *bytes.Buffer) error {
			return cli.WriteSqueue(b, cli.SortJobs(clitest.Jobs()), mustSqueue("%i %t %T %j %u %P %M %D %R"), false, now)
		}},
		{"squeue_o_width.golden", func(b *bytes.Buffer) error {
			return cli.WriteSqueue(b, cli.SortJobs(clitest.Jobs()), mustSqueue("%.7i|%-4t|%.12T|%5j|%l|%a"), true, now)
		}},
		{"sacct_P.golden", func(b *bytes.Buffer) error {
			f, err := cli.ParseSacctFormat("JobIdRaw,JobID,JobName,State,ExitCode,Account,NodeList,Elapsed")
			if err != nil {
				return err
			}
			return cli.WriteSacct(b, sacctRows(), f, cli.SacctParsable2, true, now)
		}},
		{"sacct_p_n.golden", func(b *bytes.Buffer) error {
			f, err := cli.ParseSacctFormat("jobidraw,state")
			if err != nil {
				return err
			}
			return cli.WriteSacct(b, sacctRows(), f, cli.SacctParsable, false, now)
		}},
		{"sacct.golden", func(b *bytes.Buffer) error {
			f, err := cli.ParseSacctFormat(cli.SacctDefaultFormat + ",NodeList,Elapsed,Account%20")
			if err != nil {
				return err
			}
			return cli.WriteSacct(b, sacctRows(), f, cli.SacctTable, true, now)
		}},
		{"sinfo.golden", func(b *bytes.Buffer) error {
			return cli.WriteSinfo(b, cli.SinfoRows(clitest.Partitions().Partitions, clitest.Nodes(), false), cli.SinfoDefaultFormat, true)
		}},
		{"sinfo_o_P.golden", func(b *bytes.Buffer) error {
			return cli.WriteSinfo(b, cli.SinfoRows(clitest.Partitions().Partitions, clitest.Nodes(), false), "%P", true)
		}},
		{"sinfo_N_h.golden", func(b *bytes.Buffer) error {
			parts := clitest.Partitions().Partitions
			parts[0].Nodes = []string{"node03", "node04", "node05"}
			return cli.WriteSinfo(b, cli.SinfoRows(parts, clitest.Nodes(), true), cli.SinfoNodeFormat, false)
		}},
		{"hosts.json.golden", func(b *bytes.Buffer) error { return cli.WriteJSON(b, cli.SortNodes(clitest.Nodes())) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.render(&b); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, b.Bytes())
		})
	}
}

func mustSqueue(f string) cli.SqueueFormat {
	s, err := cli.ParseSqueueFormat(f)
	if err != nil {
		panic(err)
	}
	return s
}

// sacctRows are the live fixtures and the accounting store's, each job
// once, as sacct merges them.
func sacctRows() []cli.SacctJob {
	var rows []cli.SacctJob
	seen := map[uint64]bool{}
	for _, j := range cli.SortJobs(clitest.Jobs()) {
		rows = append(rows, cli.SacctFromJob(j))
		seen[j.ID] = true
	}
	for _, h := range clitest.History() {
		if !seen[h.ID] {
			rows = append(rows, cli.SacctFromHistory(h))
		}
	}
	old := clitest.History()[0]
	old.ID, old.Name, old.State, old.ExitCode = 2, "a_rather_long_name", api.JobTimeout, 137
	old.Started, old.Ended = old.Submitted, old.Submitted.Add(26*time.Hour+3*time.Minute+4*time.Second)
	return append(rows, cli.SacctFromHistory(old))
}

// Renderings must not move with the machine's zone: only now's location
// counts.
func TestRenderIgnoresLocalZone(t *testing.T) {
	var a, b bytes.Buffer
	if err := cli.WriteJob(&a, clitest.Job(12), clitest.Now); err != nil {
		t.Fatal(err)
	}
	if err := cli.WriteJob(&b, clitest.Job(12), clitest.Now.UTC()); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("timestamps did not follow now's location")
	}
}

// hostsOf is req's session's containers, as bsub expands its job file.
func hostsOf(req api.SubmitRequest) string {
	j := wire.FromAPI(req.Spec)
	return j.Hosts()
}
