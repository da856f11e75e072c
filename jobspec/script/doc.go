// Package script turns an LSF or Slurm batch script, or a bsub command
// line, into a troupe job: the #BSUB and #SBATCH directives (and bsub's
// own options) become a cluster session, the script becomes main1's
// command, and the job runs as the submitter, in the submit directory,
// with the submitter's environment, on the node's own tree (image
// "host") unless a directive or the site names another image.
//
// Detect tells a job file (HCL) from a script; Parse reads a script's
// directives into Options; Options.Set applies one option given on the
// command line (it wins over the script's); Options.Job builds the
// jobspec.Job. The mapping (LSF's -n slots and span[], Slurm's nodes,
// tasks and cpus per task) is documented in troupe-job(5), SCRIPT JOBS.
//
// Options troupe accepts but cannot honour (-x, -U, --exclusive, …) give one
// warning each, naming the option; unknown directives a warning with the
// script's line number; a bad value an error with the line.
//
// Of troupe it imports jobspec and internal/api only; it must not import
// sched/... or nodelet/....
package script
