package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
)

// scontrolShowLicenses is scontrol show licenses [NAME]: each license of
// the site as Slurm writes it (Reserved: none is held for a reservation;
// Remote: all are the site's own).
func scontrolShowLicenses(ctx context.Context, c *client.Client, names []string, one bool, stdout, stderr io.Writer) int {
	const prog = "scontrol"
	l, err := c.Partitions(ctx)
	if err != nil {
		return fail(stderr, prog, "slurm_load_licenses error: %v", err)
	}
	var shown int
	for _, lic := range l.Licenses {
		if len(names) == 0 || slices.Contains(names, lic.Name) {
			writeRecord(stdout, licenseRecord(lic), one)
			shown++
		}
	}
	if shown == 0 && len(names) > 0 {
		fmt.Fprintf(stderr, "License %s not found\n", names[0])
		return 1
	}
	return 0
}

func licenseRecord(l api.License) []kv {
	return []kv{
		{key: "LicenseName", value: l.Name},
		{key: "Total", value: strconv.Itoa(l.Total), nl: true},
		{key: "Used", value: strconv.Itoa(l.Used)},
		{key: "Free", value: strconv.Itoa(l.Free)},
		{key: "Reserved", value: "0"},
		{key: "Remote", value: "no"},
	}
}
