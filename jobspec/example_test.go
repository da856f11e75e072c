package jobspec_test

import (
	"fmt"
	"os"

	"github.com/troupe-hpc/troupe/jobspec"
)

func ExampleParse() {
	src := []byte(`
locals {
  nodes = 3
}

job "train" {
  walltime = "1:30:00"

  cluster {
    size = local.nodes
    mode = "multi-node"
  }

  resources {
    memory = "16GiB"
    gpu    = 0.5
  }

  image   = "pytorch-2.3"
  command = ["mpirun", "python", "train.py"]
}
`)
	job, diags := jobspec.Parse("train.hcl", src)
	if diags.HasErrors() {
		fmt.Print(jobspec.FormatDiagnostics(diags))
		return
	}
	fmt.Println(job.Name, job.Walltime, job.Cluster.Mode, jobspec.FormatMemory(job.Resources.Memory), job.Resources.CPU)
	fmt.Println(job.Replicas())
	for _, c := range job.Containers() {
		fmt.Println(c.Rank, c.Host, c.Command)
	}
	// Output:
	// train 1h30m0s multi-node 16GiB 1
	// main:1,sub:2
	// 0 main1 [mpirun python train.py]
	// 1 sub1 []
	// 2 sub2 []
}

func ExampleWriteDiagnostics() {
	src := []byte(`job "train" {
  image   = "pytorch-2.3"
  command = ["python", "train.py"]

  cluster {
    size = 2
    mode = "multinode"
  }
}
`)
	_, diags := jobspec.Parse("train.hcl", src)
	for _, d := range diags {
		fmt.Println(jobspec.FormatDiagnostic(d))
	}
	fmt.Println()
	_ = jobspec.WriteDiagnostics(os.Stdout, "train.hcl", src, diags)
	// Output:
	// train.hcl:7:12: Invalid cluster mode; cluster mode "multinode" is not valid; use "single-node" or "multi-node".
	//
	// Error: Invalid cluster mode
	//
	//   on train.hcl line 7, in job "train":
	//    7:     mode = "multinode"
	//
	// cluster mode "multinode" is not valid; use "single-node" or "multi-node".
}
