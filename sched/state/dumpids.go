package state

// LastJobID is the highest job id the state in d has given: its newest
// job's, or the high-water mark purges keep once jobs left the table.
func (d *Dump) LastJobID() uint64 {
	var last uint64
	for _, j := range d.Jobs {
		if j != nil {
			last = max(last, j.ID)
		}
	}
	for _, e := range d.Indexes {
		if e != nil && e.Table == lastIDEntry {
			last = max(last, e.Index)
		}
	}
	return last
}
