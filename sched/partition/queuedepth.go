package partition

// DefaultQueueDepth is how many waiting jobs one scheduling pass tries
// when the file sets none (besides those that keep a reservation; the
// job of highest priority is always tried): the others keep their
// reason and are tried on a later pass, as the jobs ahead of them
// start. Slurm bounds its passes alike (default_queue_depth,
// bf_max_job_test).
const DefaultQueueDepth = 1000

// Queue is the bound on the waiting jobs one pass tries
// (DefaultQueueDepth when the file sets none); 0: no bound.
func (c *Config) Queue() int {
	if c.QueueDepth == 0 {
		return DefaultQueueDepth
	}
	return max(0, c.QueueDepth)
}
