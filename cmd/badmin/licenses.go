package main

import (
	"context"
	"io"
	"strconv"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

// licenses is badmin licenses: the site's licenses (partitions.hcl's
// license blocks) and their use now; -o json the list as the API has it.
func licenses(ctx context.Context, c *client.Client, json bool, stdout io.Writer) error {
	list, err := c.Partitions(ctx)
	if err != nil {
		return err
	}
	l := list.Licenses
	if l == nil {
		l = []api.License{}
	}
	if json {
		return cli.WriteJSON(stdout, l)
	}
	t := cli.NewTable(stdout, "LICENSE", "TOTAL", "USED", "FREE", "WAITING")
	for _, x := range l {
		t.Row(x.Name, strconv.Itoa(x.Total), strconv.Itoa(x.Used), strconv.Itoa(x.Free), strconv.Itoa(x.Waiting))
	}
	return t.Flush()
}
